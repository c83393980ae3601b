#ifndef DT_GSTREAMER_SHIM_H
#define DT_GSTREAMER_SHIM_H
#define GST_USE_UNSTABLE_API 1
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <gst/rtp/gstrtpbuffer.h>
#include <nice/agent.h>
#include <stdio.h>
#include <string.h>

// GObject's variadic calls (g_signal_emit_by_name, g_object_get, gst_structure_get) and its
// macros (g_signal_connect) are not callable from Swift: these shims give each use one typed
// C function. Signal trampolines receive a `ctx` (an opaque Swift object) and forward to
// plain C function pointers that Swift provides.

typedef void (*dt_candidate_cb)(void *ctx, guint mline, const gchar *candidate);
typedef void (*dt_state_cb)(void *ctx, const gchar *property, gint value);
typedef void (*dt_channel_cb)(void *ctx, GstWebRTCDataChannel *channel);
// Decoded remote audio, with the time it came out of the decoder on the pipeline clock
// (GStreamer's monotonic system clock), ns; GST_CLOCK_TIME_NONE if unknown.
typedef void (*dt_audio_cb)(void *ctx, const void *data, gsize size, guint64 now);
// A jitter buffer rtpbin made for a remote SSRC (rtpbin owns it: ref it to keep it).
typedef void (*dt_jitterbuffer_cb)(void *ctx, GstElement *jitterbuffer, guint ssrc);
// An RTP packet reaching the audio jitter buffer: its sequence number and RTP timestamp,
// whether RED recovered it (a copy from a later packet), and now on the clock (ns).
typedef void (*dt_arrival_cb)(void *ctx, guint16 seqnum, guint32 rtp_timestamp, gboolean recovered, guint64 now);
typedef void (*dt_text_cb)(void *ctx, const gchar *text);
typedef void (*dt_bytes_cb)(void *ctx, const void *data, gsize size);
typedef void (*dt_event_cb)(void *ctx, gint what);
typedef void (*dt_promise_cb)(void *ctx, GstPromise *promise);
// One decoded remote video frame: its size and its mean colour (sampled every 8th pixel).
typedef void (*dt_video_cb)(void *ctx, gint width, gint height, guint red, guint green, guint blue);
// A file to record to, asked for when remote video first arrives: a g_malloc'd path, or NULL.
typedef gchar *(*dt_path_cb)(void *ctx);
// A group call's single subscriber connection: decoded audio (as dt_audio_cb) and each decoded
// video frame (as dt_video_cb) of one remote stream, so each participant's media stays apart:
// `ssrc` is the stream's RTP SSRC (0 if unknown) and `mid` the m-section webrtcbin filed it under,
// which is not always the one whose SDP names that SSRC (see dt__pad_ssrc).
typedef void (*dt_mid_audio_cb)(void *ctx, const gchar *mid, guint32 ssrc, const void *data, gsize size,
                                guint64 now);
typedef void (*dt_mid_video_cb)(void *ctx, const gchar *mid, guint32 ssrc, gint width, gint height, guint red,
                                guint green, guint blue);

typedef struct dt_webrtc_callbacks {
  void *ctx;
  dt_candidate_cb candidate;
  dt_state_cb state;        // "ice-connection-state", "connection-state", "ice-gathering-state"
  dt_channel_cb channel;    // a data channel opened by the remote peer
  dt_audio_cb audio;        // decoded remote audio: S16LE, 48 kHz, mono
  dt_text_cb error;         // an error posted on the pipeline's bus
  dt_video_cb video;        // each decoded remote video frame (VP8 or H.264)
  dt_path_cb record_video;   // NULL, or where to write the remote video (WebM or MPEG-TS), unre-encoded
  dt_jitterbuffer_cb jitterbuffer;  // each jitter buffer rtpbin makes
  dt_arrival_cb arrival;            // packets reaching a jitter buffer watched with dt_jitterbuffer_watch
  dt_mid_audio_cb mid_audio;        // NULL, or each section's audio apart (then `audio` is not called)
  dt_mid_video_cb mid_video;        // NULL, or each section's video frames apart (then `video` is not called)
} dt_webrtc_callbacks;

static void dt__on_ice_candidate(GstElement *w, guint mline, gchar *candidate, gpointer ud) {
  (void)w;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  c->candidate(c->ctx, mline, candidate);
}

static void dt__on_notify(GObject *o, GParamSpec *p, gpointer ud) {
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  gint v = 0;
  g_object_get(o, p->name, &v, NULL);
  c->state(c->ctx, p->name, v);
}

static void dt__on_data_channel(GstElement *w, GstWebRTCDataChannel *ch, gpointer ud) {
  (void)w;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  c->channel(c->ctx, ch);
}

// Now on the element's clock (ns), or GST_CLOCK_TIME_NONE before it has one.
static guint64 dt__clock_now(GstElement *element) {
  guint64 now = GST_CLOCK_TIME_NONE;
  GstClock *clock = gst_element_get_clock(element);
  if (clock) {
    now = gst_clock_get_time(clock);
    gst_object_unref(clock);
  }
  return now;
}

static void dt__on_handoff(GstElement *sink, GstBuffer *buffer, GstPad *pad, gpointer ud) {
  (void)pad;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  guint64 now = dt__clock_now(sink);
  GstMapInfo map;
  if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
    c->audio(c->ctx, map.data, map.size, now);
    gst_buffer_unmap(buffer, &map);
  }
}

// webrtcbin (1.22) sizes rtpbin's packet storage for ULPFEC: the storage then keeps every packet
// RED recovered (flagged redundant) for a ULPFEC decoder to ask for, and passes none on. Without
// ULPFEC (audio: Opus has its own FEC) that decoder ignores losses, and RED's repairs would be
// thrown away. A storage of size 0 passes them on to the jitter buffer like any packet.
static void dt__on_new_storage(GstElement *rtpbin, GstElement *storage, guint session, gpointer ud) {
  (void)rtpbin; (void)session; (void)ud;
  g_object_set(storage, "size-time", (guint64)0, NULL);
}

static void dt__on_new_jitterbuffer(GstElement *rtpbin, GstElement *jitterbuffer, guint session, guint ssrc,
                                    gpointer ud) {
  (void)rtpbin; (void)session;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  if (c->jitterbuffer) c->jitterbuffer(c->ctx, jitterbuffer, ssrc);
}

// The m-section a remote pad of webrtcbin belongs to and the SSRC it carries, for the handoffs of
// its branch.
typedef struct dt__section {
  dt_webrtc_callbacks *c;
  gchar *mid;
  guint32 ssrc;
} dt__section;

static void dt__section_free(gpointer data, GClosure *closure) {
  (void)closure;
  dt__section *section = (dt__section *)data;
  g_free(section->mid);
  g_free(section);
}

/// The mid of the transceiver behind one of webrtcbin's src pads (g_malloc'd), or NULL.
static gchar *dt__pad_mid(GstPad *pad) {
  GstWebRTCRTPTransceiver *transceiver = NULL;
  if (!g_object_class_find_property(G_OBJECT_GET_CLASS(pad), "transceiver")) return NULL;
  g_object_get(pad, "transceiver", &transceiver, NULL);
  if (!transceiver) return NULL;
  gchar *mid = NULL;
  g_object_get(transceiver, "mid", &mid, NULL);
  gst_object_unref(transceiver);
  return mid;
}

/// The SSRC a remote src pad of webrtcbin carries (0 if unknown): its target is rtpbin's
/// `recv_rtp_src_<session>_<ssrc>_<pt>`. webrtcbin 1.22 picks the pad's transceiver from the SSRC
/// only when a remote description named that SSRC (`a=ssrc`) before rtpbin first saw it; an SSRC
/// whose packets (or RTCP) came first, as an SFU's do when it starts forwarding a new participant
/// as soon as it makes the offer that adds them, is filed under the transceiver of m-line 0 for
/// good (its entry is never corrected). So the pad's transceiver cannot say whose media it is,
/// its SSRC can.
static guint32 dt__pad_ssrc(GstPad *pad) {
  if (!GST_IS_GHOST_PAD(pad)) return 0;
  GstPad *target = gst_ghost_pad_get_target(GST_GHOST_PAD(pad));
  if (!target) return 0;
  guint session = 0, ssrc = 0, pt = 0;
  gchar *name = gst_pad_get_name(target);
  if (!name || sscanf(name, "recv_rtp_src_%u_%u_%u", &session, &ssrc, &pt) != 3) ssrc = 0;
  g_free(name);
  gst_object_unref(target);
  return (guint32)ssrc;
}

static void dt__on_section_handoff(GstElement *sink, GstBuffer *buffer, GstPad *pad, gpointer ud) {
  (void)pad;
  dt__section *section = (dt__section *)ud;
  guint64 now = dt__clock_now(sink);
  GstMapInfo map;
  if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
    section->c->mid_audio(section->c->ctx, section->mid, section->ssrc, map.data, map.size, now);
    gst_buffer_unmap(buffer, &map);
  }
}

/// A decoded frame's size and mean colour (sampled every 8th pixel).
static void dt__frame_colour(GstBuffer *buffer, GstPad *pad, gint *out_width, gint *out_height, guint *red,
                             guint *green, guint *blue) {
  gint width = 0, height = 0;
  GstCaps *caps = gst_pad_get_current_caps(pad);
  if (caps) {
    const GstStructure *s = gst_caps_get_structure(caps, 0);
    if (s) {
      gst_structure_get_int(s, "width", &width);
      gst_structure_get_int(s, "height", &height);
    }
    gst_caps_unref(caps);
  }
  guint64 r = 0, g = 0, b = 0, n = 0;
  GstMapInfo map;
  if (width > 0 && height > 0 && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
    gsize stride = ((gsize)width * 3 + 3) & ~(gsize)3;  // RGB rows are padded to 4 bytes
    for (gint y = 0; y < height; y += 8) {
      for (gint x = 0; x < width; x += 8) {
        gsize o = (gsize)y * stride + (gsize)x * 3;
        if (o + 2 >= map.size) break;
        r += map.data[o]; g += map.data[o + 1]; b += map.data[o + 2]; n++;
      }
    }
    gst_buffer_unmap(buffer, &map);
  }
  *out_width = width;
  *out_height = height;
  *red = n ? (guint)(r / n) : 0;
  *green = n ? (guint)(g / n) : 0;
  *blue = n ? (guint)(b / n) : 0;
}

static void dt__on_section_video_handoff(GstElement *sink, GstBuffer *buffer, GstPad *pad, gpointer ud) {
  (void)sink;
  dt__section *section = (dt__section *)ud;
  gint width = 0, height = 0;
  guint r = 0, g = 0, b = 0;
  dt__frame_colour(buffer, pad, &width, &height, &r, &g, &b);
  section->c->mid_video(section->c->ctx, section->mid, section->ssrc, width, height, r, g, b);
}

static void dt__on_video_handoff(GstElement *sink, GstBuffer *buffer, GstPad *pad, gpointer ud) {
  (void)sink;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  gint width = 0, height = 0;
  guint r = 0, g = 0, b = 0;
  dt__frame_colour(buffer, pad, &width, &height, &r, &g, &b);
  if (c->video) c->video(c->ctx, width, height, r, g, b);
}

// Remote RTP pads: audio is depayloaded, decoded and handed to `audio`; VP8 and H.264 video
// is decoded and each frame reported to `video`; anything else is drained into a fakesink so it
// never blocks the pipeline.
static void dt__on_pad_added(GstElement *w, GstPad *pad, gpointer ud) {
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  gboolean audio = FALSE, vp8 = FALSE, h264 = FALSE;
  GstCaps *caps = gst_pad_get_current_caps(pad);
  if (!caps) caps = gst_pad_query_caps(pad, NULL);
  if (caps) {
    const GstStructure *s = gst_caps_get_structure(caps, 0);
    const gchar *media = s ? gst_structure_get_string(s, "media") : NULL;
    const gchar *encoding = s ? gst_structure_get_string(s, "encoding-name") : NULL;
    gboolean video = media && strcmp(media, "video") == 0 && encoding;
    audio = media && strcmp(media, "audio") == 0;
    vp8 = video && g_ascii_strcasecmp(encoding, "VP8") == 0;
    h264 = video && g_ascii_strcasecmp(encoding, "H264") == 0;
    gst_caps_unref(caps);
  }
  // Depayloaded video, then (tee) its decoder and, when recording, the stream itself in a live
  // (streamable) container: playable even when the call ends without the muxer finishing the
  // file. WebM holds VP8; H.264 goes to MPEG-TS, which carries the parameter sets in-band, so
  // an encoder that changes them mid-call (OpenH264 re-picks its level as the bitrate moves)
  // does not end the file (Matroska refuses caps changes).
  const gchar *depay = vp8 ? "rtpvp8depay" : "rtph264depay";
  // One decoding thread: libvpx's threads synchronise by spinning, which on a loaded 2-core
  // machine costs more than it decodes.
  const gchar *decode = vp8 ? "vp8dec threads=1" : "h264parse ! openh264dec";
  const gchar *mux = vp8 ? "webmmux streamable=true"
                         : "h264parse config-interval=-1 ! video/x-h264,stream-format=byte-stream ! mpegtsmux";
  gchar *pipeline = NULL;
  // Named only now: a connection that never receives video (a pre-connect leg that lost, a
  // connection replaced before media) takes no file.
  gchar *path = (vp8 || h264) && c->record_video ? c->record_video(c->ctx) : NULL;
  if (path) {
    gchar *location = g_strescape(path, NULL);
    g_free(path);
    pipeline = g_strdup_printf(
      "queue ! %s ! tee name=t ! queue ! %s ! videoconvert ! video/x-raw,format=RGB ! "
      "fakesink name=out signal-handoffs=true sync=false async=false "
      "t. ! queue ! %s ! filesink location=\"%s\" sync=false async=false", depay, decode, mux, location);
    g_free(location);
  } else if (vp8 || h264) {
    pipeline = g_strdup_printf(
      "queue ! %s ! %s ! videoconvert ! video/x-raw,format=RGB ! "
      "fakesink name=out signal-handoffs=true sync=false async=false", depay, decode);
  }
  const gchar *desc = audio
    // Concealment for what the jitter buffer declares lost, and in-band FEC: a lost packet is
    // decoded from the next one's redundant copy (the decoder waits one frame for it).
    ? "queue ! rtpopusdepay ! opusdec plc=true use-inband-fec=true ! audioconvert ! audioresample ! "
      "audio/x-raw,format=S16LE,rate=48000,channels=1 ! fakesink name=out signal-handoffs=true sync=false async=false"
    : pipeline ? pipeline
    : "queue ! fakesink sync=false async=false";
  GError *err = NULL;
  GstElement *bin = gst_parse_bin_from_description(desc, TRUE, &err);
  g_free(pipeline);
  if (!bin) {
    if (err) { c->error(c->ctx, err->message); g_error_free(err); }
    return;
  }
  if (audio || vp8 || h264) {
    GstElement *out = gst_bin_get_by_name(GST_BIN(bin), "out");
    gboolean by_section = audio ? c->mid_audio != NULL : c->mid_video != NULL;
    gchar *mid = by_section ? dt__pad_mid(pad) : NULL;
    if (out && mid) {
      // Each section's media apart: the handoff knows its mid (freed with the handler).
      dt__section *section = g_new0(dt__section, 1);
      section->c = c;
      section->mid = mid;
      section->ssrc = dt__pad_ssrc(pad);
      g_signal_connect_data(out, "handoff",
                            G_CALLBACK(audio ? dt__on_section_handoff : dt__on_section_video_handoff), section,
                            dt__section_free, (GConnectFlags)0);
    } else if (out) {
      g_free(mid);
      g_signal_connect_data(out, "handoff", G_CALLBACK(audio ? dt__on_handoff : dt__on_video_handoff), c, NULL,
                            (GConnectFlags)0);
    }
    if (out) gst_object_unref(out);
  }
  GstObject *parent = gst_object_get_parent(GST_OBJECT(w));
  if (!parent) { gst_object_unref(bin); return; }
  gst_bin_add(GST_BIN(parent), bin);
  gst_object_unref(parent);
  gst_element_sync_state_with_parent(bin);
  GstPad *sinkpad = gst_element_get_static_pad(bin, "sink");
  if (sinkpad) {
    gst_pad_link(pad, sinkpad);
    gst_object_unref(sinkpad);
  }
}

static GstBusSyncReply dt__on_bus(GstBus *bus, GstMessage *msg, gpointer ud) {
  (void)bus;
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gchar *dbg = NULL;
    gst_message_parse_error(msg, &err, &dbg);
    c->error(c->ctx, err ? err->message : "unknown error");
    if (err) g_error_free(err);
    g_free(dbg);
  }
  // Nobody pops this bus: drop everything so it never grows.
  return GST_BUS_DROP;
}

/// Connects every signal of `webrtc` (inside `pipeline`) to `cbs`; returns the heap copy that
/// must be freed with `dt_webrtc_disconnect` after the pipeline reached NULL.
static inline dt_webrtc_callbacks *dt_webrtc_connect(GstElement *pipeline, GstElement *webrtc, const dt_webrtc_callbacks *cbs) {
  dt_webrtc_callbacks *c = g_new0(dt_webrtc_callbacks, 1);
  *c = *cbs;
  g_signal_connect_data(webrtc, "on-ice-candidate", G_CALLBACK(dt__on_ice_candidate), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(webrtc, "notify::ice-connection-state", G_CALLBACK(dt__on_notify), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(webrtc, "notify::connection-state", G_CALLBACK(dt__on_notify), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(webrtc, "notify::ice-gathering-state", G_CALLBACK(dt__on_notify), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(webrtc, "on-data-channel", G_CALLBACK(dt__on_data_channel), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(webrtc, "pad-added", G_CALLBACK(dt__on_pad_added), c, NULL, (GConnectFlags)0);
  GstElement *rtpbin = gst_bin_get_by_name(GST_BIN(webrtc), "rtpbin");
  if (rtpbin) {
    g_signal_connect_data(rtpbin, "new-jitterbuffer", G_CALLBACK(dt__on_new_jitterbuffer), c, NULL, (GConnectFlags)0);
    // After webrtcbin's own handler, which sets the size this undoes.
    g_signal_connect_data(rtpbin, "new-storage", G_CALLBACK(dt__on_new_storage), c, NULL, (GConnectFlags)0);
    gst_object_unref(rtpbin);
  }
  GstBus *bus = gst_element_get_bus(pipeline);
  if (bus) {
    gst_bus_set_sync_handler(bus, dt__on_bus, c, NULL);
    gst_object_unref(bus);
  }
  return c;
}

/// Frees what `dt_webrtc_connect` returned (after `dt_webrtc_disconnect` and the NULL state).
static inline void dt_webrtc_callbacks_free(dt_webrtc_callbacks *c) {
  g_free(c);
}

static inline void dt_webrtc_disconnect(GstElement *pipeline, GstElement *webrtc, dt_webrtc_callbacks *c) {
  g_signal_handlers_disconnect_matched(webrtc, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, c);
  GstElement *rtpbin = gst_bin_get_by_name(GST_BIN(webrtc), "rtpbin");
  if (rtpbin) {
    g_signal_handlers_disconnect_matched(rtpbin, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, c);
    gst_object_unref(rtpbin);
  }
  GstBus *bus = gst_element_get_bus(pipeline);
  if (bus) {
    gst_bus_set_sync_handler(bus, NULL, NULL, NULL);
    gst_object_unref(bus);
  }
}

// MARK: DTLS certificate

static void dt__set_pem(GstBin *bin, GstBin *sub, GstElement *element, gpointer ud) {
  (void)bin; (void)sub;
  GstElementFactory *factory = gst_element_get_factory(element);
  if (factory && strcmp(GST_OBJECT_NAME(factory), "dtlssrtpdec") == 0) {
    g_object_set(element, "pem", (const gchar *)ud, NULL);
    // The DTLS connection was made with the old certificate when the transport set its
    // connection id: setting the id again remakes it with ours (its encoder looks it up by
    // id only when it starts, which is later).
    gchar *id = NULL;
    g_object_get(element, "connection-id", &id, NULL);
    if (id) {
      g_object_set(element, "connection-id", id, NULL);
      g_free(id);
    }
  }
}

static void dt__free_closure_data(gpointer data, GClosure *closure) { (void)closure; g_free(data); }

/// Makes every DTLS transport webrtcbin creates inside `pipeline` present `pem` (certificate
/// and private key) instead of GStreamer's generated RSA certificate.
static inline void dt_pipeline_use_certificate(GstElement *pipeline, const gchar *pem) {
  // Transports made while the pipeline was parsed (linking webrtcbin's sink pad creates one)...
  GstIterator *it = gst_bin_iterate_recurse(GST_BIN(pipeline));
  GValue item = G_VALUE_INIT;
  while (gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    dt__set_pem(NULL, NULL, GST_ELEMENT(g_value_get_object(&item)), (gpointer)pem);
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  // ...and those made later (data channel, answers).
  g_signal_connect_data(pipeline, "deep-element-added", G_CALLBACK(dt__set_pem), g_strdup(pem),
                        dt__free_closure_data, (GConnectFlags)0);
}

/// Sets the codec preferences of the first transceiver (ours, reserved at parse time): webrtcbin
/// matches a remote offer's m-line to an existing transceiver only if these caps intersect.
static inline void dt_webrtc_set_codec_preferences(GstElement *webrtc, guint index, const gchar *caps_text) {
  GArray *transceivers = NULL;
  g_signal_emit_by_name(webrtc, "get-transceivers", &transceivers);
  if (!transceivers) return;
  if (transceivers->len > index) {
    GstCaps *caps = gst_caps_from_string(caps_text);
    if (caps) {
      g_object_set(g_array_index(transceivers, GstWebRTCRTPTransceiver *, index), "codec-preferences", caps, NULL);
      gst_caps_unref(caps);
    }
  }
  g_array_unref(transceivers);
}

static inline void dt_webrtc_set_first_codec_preferences(GstElement *webrtc, const gchar *caps_text) {
  dt_webrtc_set_codec_preferences(webrtc, 0, caps_text);
}

/// The RTP payload type on webrtcbin's first sink pad (what our sender negotiated), or -1 while
/// nothing has been negotiated.
static inline gint dt_webrtc_sink_payload_at(GstElement *webrtc, const gchar *pad_name) {
  GstPad *pad = gst_element_get_static_pad(webrtc, pad_name);
  if (!pad) return -1;
  gint pt = -1;
  GstCaps *caps = gst_pad_get_current_caps(pad);
  if (caps) {
    const GstStructure *s = gst_caps_get_structure(caps, 0);
    if (s && !gst_structure_get_int(s, "payload", &pt)) pt = -1;
    gst_caps_unref(caps);
  }
  gst_object_unref(pad);
  return pt;
}

/// Asks an encoder for a keyframe (the camera came back, the path came up: the receiver's
/// decoder needs one). Sent upstream into the encoder's source pad, as rtpsession sends a PLI:
/// an upstream event takes no stream lock. The downstream form waits for the encoder's
/// streaming thread, which webrtcbin holds blocked on its sink pad until negotiation is done;
/// a camera turned on before the answer then waited for ever, and the engine with it.
static inline void dt_force_key_unit(GstElement *encoder) {
  GstStructure *s = gst_structure_new("GstForceKeyUnit", "running-time", G_TYPE_UINT64, GST_CLOCK_TIME_NONE,
                                      "all-headers", G_TYPE_BOOLEAN, TRUE, "count", G_TYPE_UINT, 0, NULL);
  GstEvent *event = gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM, s);
  GstPad *src = gst_element_get_static_pad(encoder, "src");
  if (src) {
    gst_pad_send_event(src, event);
    gst_object_unref(src);
  } else {
    gst_event_unref(event);
  }
}

static inline gint dt_webrtc_sink_payload(GstElement *webrtc) { return dt_webrtc_sink_payload_at(webrtc, "sink_0"); }

// MARK: Promises

typedef struct { void *ctx; dt_promise_cb cb; } dt__promise_ctx;

static void dt__promise_changed(GstPromise *p, gpointer ud) {
  dt__promise_ctx *c = (dt__promise_ctx *)ud;
  c->cb(c->ctx, p);
}

/// A promise whose reply goes to `cb` (on a GStreamer thread); the caller gives its one
/// reference to the action it emits with, `cb` must copy what it needs out of the reply.
static inline GstPromise *dt_promise_new(dt_promise_cb cb, void *ctx) {
  dt__promise_ctx *c = g_new0(dt__promise_ctx, 1);
  c->ctx = ctx;
  c->cb = cb;
  return gst_promise_new_with_change_func(dt__promise_changed, c, g_free);
}

/// The SDP text of a create-offer/create-answer reply (`field` = "offer"/"answer"), or NULL;
/// `error` gets the reply's error message, if any. Free both with g_free.
static inline gchar *dt_promise_take_sdp(GstPromise *p, const gchar *field, gchar **error) {
  *error = NULL;
  if (gst_promise_wait(p) != GST_PROMISE_RESULT_REPLIED) { *error = g_strdup("promise not replied"); return NULL; }
  const GstStructure *reply = gst_promise_get_reply(p);
  if (!reply) { *error = g_strdup("empty reply"); return NULL; }
  GError *gerr = NULL;
  if (gst_structure_has_field(reply, "error")) {
    gst_structure_get(reply, "error", G_TYPE_ERROR, &gerr, NULL);
    *error = g_strdup(gerr ? gerr->message : "error");
    if (gerr) g_error_free(gerr);
    return NULL;
  }
  GstWebRTCSessionDescription *desc = NULL;
  gst_structure_get(reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &desc, NULL);
  if (!desc) { *error = g_strdup("no description in reply"); return NULL; }
  gchar *text = gst_sdp_message_as_text(desc->sdp);
  gst_webrtc_session_description_free(desc);
  return text;
}

/// The error of a set-*-description reply, or NULL when it succeeded.
static inline gchar *dt_promise_error(GstPromise *p) {
  if (gst_promise_wait(p) != GST_PROMISE_RESULT_REPLIED) return NULL;
  const GstStructure *reply = gst_promise_get_reply(p);
  if (!reply || !gst_structure_has_field(reply, "error")) return NULL;
  GError *gerr = NULL;
  gst_structure_get(reply, "error", G_TYPE_ERROR, &gerr, NULL);
  gchar *m = g_strdup(gerr ? gerr->message : "error");
  if (gerr) g_error_free(gerr);
  return m;
}

// MARK: webrtcbin actions

static inline void dt_webrtc_create_offer(GstElement *w, GstPromise *p) {
  g_signal_emit_by_name(w, "create-offer", NULL, p);
}

static inline void dt_webrtc_create_answer(GstElement *w, GstPromise *p) {
  g_signal_emit_by_name(w, "create-answer", NULL, p);
}

/// type: GST_WEBRTC_SDP_TYPE_OFFER / _ANSWER. Returns FALSE (and unrefs the promise) when the
/// SDP text does not parse.
static inline gboolean dt_webrtc_set_description(GstElement *w, gboolean local, GstWebRTCSDPType type, const gchar *sdp, GstPromise *p) {
  GstSDPMessage *msg = NULL;
  if (gst_sdp_message_new_from_text(sdp, &msg) != GST_SDP_OK || !msg) {
    gst_promise_unref(p);
    return FALSE;
  }
  GstWebRTCSessionDescription *desc = gst_webrtc_session_description_new(type, msg);
  g_signal_emit_by_name(w, local ? "set-local-description" : "set-remote-description", desc, p);
  gst_webrtc_session_description_free(desc);
  return TRUE;
}

static inline void dt_webrtc_add_ice_candidate(GstElement *w, guint mline, const gchar *candidate) {
  g_signal_emit_by_name(w, "add-ice-candidate", mline, candidate);
}

static inline gboolean dt_webrtc_add_turn_server(GstElement *w, const gchar *uri) {
  gboolean ok = FALSE;
  g_signal_emit_by_name(w, "add-turn-server", uri, &ok);
  return ok;
}

static inline void dt_webrtc_get_stats(GstElement *w, GstPromise *p) {
  g_signal_emit_by_name(w, "get-stats", NULL, p);
}

/// Reserves a receive-only video transceiver for these codecs (webrtcbin 1.22 cannot add the
/// first track mid-call).
static inline void dt_webrtc_reserve_video(GstElement *w, const gchar *caps_text) {
  GstCaps *caps = gst_caps_from_string(caps_text);
  if (!caps) return;
  GstWebRTCRTPTransceiver *t = NULL;
  g_signal_emit_by_name(w, "add-transceiver", GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, caps, &t);
  gst_caps_unref(caps);
  if (t) gst_object_unref(t);
}

/// Puts the bin `description` (an encoder and its payloader) between the valve "camera" and
/// the capsfilter "vcaps", replacing the one installed before ("vcodec"). The caller closes
/// the valve first, so no buffer is inside the old bin while it is taken out. FALSE (and
/// `error` set, to be g_free'd) when the description does not parse or link.
static inline gboolean dt_install_video_encoder(GstElement *pipeline, const gchar *description, gchar **error) {
  GstElement *valve = gst_bin_get_by_name(GST_BIN(pipeline), "camera");
  GstElement *caps = gst_bin_get_by_name(GST_BIN(pipeline), "vcaps");
  gboolean ok = FALSE;
  if (!valve || !caps) {
    *error = g_strdup("no camera branch");
  } else {
    GError *err = NULL;
    GstElement *bin = gst_parse_bin_from_description(description, TRUE, &err);
    if (!bin) {
      *error = g_strdup(err ? err->message : "the encoder does not parse");
      if (err) g_error_free(err);
    } else {
      GstElement *old = gst_bin_get_by_name(GST_BIN(pipeline), "vcodec");
      if (old) {
        gst_element_unlink(valve, old);
        gst_element_unlink(old, caps);
        gst_element_set_state(old, GST_STATE_NULL);
        gst_bin_remove(GST_BIN(pipeline), old);
        gst_object_unref(old);
      }
      gst_object_set_name(GST_OBJECT(bin), "vcodec");
      gst_bin_add(GST_BIN(pipeline), bin);
      ok = gst_element_link_many(valve, bin, caps, NULL);
      if (ok) ok = gst_element_sync_state_with_parent(bin);
      if (!ok) *error = g_strdup("the encoder does not link");
    }
  }
  if (valve) gst_object_unref(valve);
  if (caps) gst_object_unref(caps);
  return ok;
}

static GstPadProbeReturn dt__drop_eos(GstPad *pad, GstPadProbeInfo *info, gpointer ud) {
  (void)pad; (void)ud;
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  return event && GST_EVENT_TYPE(event) == GST_EVENT_EOS ? GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK;
}

/// Keeps the end of a file source from reaching webrtcbin (an EOS there ends the stream for
/// the peer): after the last frame the branch just sends nothing.
static inline void dt_drop_eos(GstElement *element) {
  GstPad *src = gst_element_get_static_pad(element, "src");
  if (!src) return;
  gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, dt__drop_eos, NULL, NULL);
  gst_object_unref(src);
}

/// Sets the direction of the transceiver at `index` for the next offer or answer (values of
/// GstWebRTCRTPTransceiverDirection).
static inline void dt_webrtc_set_direction(GstElement *webrtc, guint index, gint direction) {
  GstWebRTCRTPTransceiver *t = NULL;
  g_signal_emit_by_name(webrtc, "get-transceiver", (gint)index, &t);
  if (!t) return;
  g_object_set(t, "direction", direction, NULL);
  gst_object_unref(t);
}

/// The shortest interval between regular RTCP reports of webrtcbin's RTP session (its default,
/// 5 s, is too slow a feedback loop for the video sender's rate control).
static void dt__rtcp_interval(GstElement *rtpbin, guint session_id, guint ssrc, gpointer ud) {
  (void)ssrc;
  GstElement *session = NULL;
  g_signal_emit_by_name(rtpbin, "get-session", session_id, &session);
  if (!session) return;
  g_object_set(session, "rtcp-min-interval", (guint64)GPOINTER_TO_SIZE(ud) * GST_MSECOND, NULL);
  gst_object_unref(session);
}

// webrtcbin makes its sessions as it negotiates: the interval is set on each as its first
// source appears.
static inline void dt_webrtc_rtcp_interval(GstElement *webrtc, guint milliseconds) {
  GstElement *rtpbin = gst_bin_get_by_name(GST_BIN(webrtc), "rtpbin");
  if (!rtpbin) return;
  g_signal_connect(rtpbin, "on-new-ssrc", G_CALLBACK(dt__rtcp_interval), GSIZE_TO_POINTER(milliseconds));
  gst_object_unref(rtpbin);
}

/// Retransmissions (RFC 4588 RTX, NACK feedback) for the transceiver at `index`.
static inline void dt_webrtc_enable_nack(GstElement *webrtc, guint index) {
  GstWebRTCRTPTransceiver *t = NULL;
  g_signal_emit_by_name(webrtc, "get-transceiver", (gint)index, &t);
  if (!t) return;
  g_object_set(t, "do-nack", TRUE, NULL);
  gst_object_unref(t);
}

/// The transceiver at `index` answers RED and ULPFEC when an offer carries them, and offers
/// both (webrtcbin's "ulp-red"; Dialtone's SDP rules keep RED only, for audio).
static inline void dt_webrtc_offer_red(GstElement *webrtc, guint index) {
  GstWebRTCRTPTransceiver *t = NULL;
  g_signal_emit_by_name(webrtc, "get-transceiver", (gint)index, &t);
  if (!t) return;
  gst_util_set_object_arg(G_OBJECT(t), "fec-type", "ulp-red");
  gst_object_unref(t);
}

/// Sets `distance` on every RED encoder inside `webrtc` that has a negotiated payload type
/// (webrtcbin makes one per sending transceiver, video's too, and leaves it at distance 0: RED
/// packets without a redundant block, or none at all when RED was not negotiated; a distance
/// on one without a payload type would wrap the stream in RED the other side does not expect).
/// Returns that payload type (the first found), or -1 when no encoder has one yet.
static inline gint dt_webrtc_red_distance(GstElement *webrtc, guint distance) {
  gint found = -1;
  GstIterator *it = gst_bin_iterate_recurse(GST_BIN(webrtc));
  GValue item = G_VALUE_INIT;
  while (gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstElement *element = GST_ELEMENT(g_value_get_object(&item));
    GstElementFactory *factory = gst_element_get_factory(element);
    if (factory && strcmp(GST_OBJECT_NAME(factory), "rtpredenc") == 0) {
      gint pt = 0;
      g_object_get(element, "pt", &pt, NULL);
      if (pt > 0) {
        g_object_set(element, "distance", distance, NULL);
        if (found == -1) found = pt;
      }
    }
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  return found;
}

/// What a jitter buffer counted so far: packets it declared lost, packets that came after their
/// place was played (thrown away; a second copy of a played packet counts here too), and
/// second copies of packets it still held.
static inline void dt_jitterbuffer_counts(GstElement *jitterbuffer, guint64 *lost, guint64 *late,
                                          guint64 *duplicates) {
  *lost = 0;
  *late = 0;
  *duplicates = 0;
  GstStructure *s = NULL;
  g_object_get(jitterbuffer, "stats", &s, NULL);
  if (!s) return;
  gst_structure_get_uint64(s, "num-lost", lost);
  gst_structure_get_uint64(s, "num-late", late);
  gst_structure_get_uint64(s, "num-duplicates", duplicates);
  gst_structure_free(s);
}

static GstPadProbeReturn dt__drop_retransmission_request(GstPad *pad, GstPadProbeInfo *info, gpointer ud) {
  (void)pad; (void)ud;
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  if (event && GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_UPSTREAM &&
      gst_event_has_name(event, "GstRTPRetransmissionRequest"))
    return GST_PAD_PROBE_DROP;
  return GST_PAD_PROBE_OK;
}

/// Has an audio jitter buffer declare a packet lost when its time is up even if nothing came
/// after it: without retransmission, rtpjitterbuffer notices a missing packet only when a later
/// one arrives, so through a burst of loss the decoder gets nothing to conceal and the playout
/// runs dry. Its retransmission timers do expect the next packet; with no retry and no retry
/// wait, one that does not come is lost at its expected time plus the latency, as with a gap.
/// GStreamer 1.22 arms that timer only for the packet after the last one that arrived: through a
/// burst only its first packet is declared on time, the rest when the burst ends
/// (JitterBufferLossOnTimeTests). The requests those timers send upstream (NACKs, which audio
/// does not negotiate) are dropped.
static inline void dt_jitterbuffer_expect_packets(GstElement *jitterbuffer) {
  g_object_set(jitterbuffer, "do-retransmission", TRUE, "rtx-max-retries", (gint)0, "rtx-retry-timeout", (gint)0,
               "rtx-min-retry-timeout", (gint)0, NULL);
  GstPad *sink = gst_element_get_static_pad(jitterbuffer, "sink");
  if (!sink) return;
  gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, dt__drop_retransmission_request, NULL, NULL);
  gst_object_unref(sink);
}

static inline void dt_object_ref(gpointer object) { gst_object_ref(object); }

static void dt__arrival(dt_webrtc_callbacks *c, GstElement *jitterbuffer, GstBuffer *buffer) {
  GstRTPBuffer rtp = GST_RTP_BUFFER_INIT;
  if (!gst_rtp_buffer_map(buffer, GST_MAP_READ, &rtp)) return;
  guint32 timestamp = gst_rtp_buffer_get_timestamp(&rtp);
  guint16 seqnum = gst_rtp_buffer_get_seq(&rtp);
  gst_rtp_buffer_unmap(&rtp);
  // rtpreddec flags what it unwrapped from a later packet's redundant block.
  gboolean recovered = GST_BUFFER_FLAG_IS_SET(buffer, GST_RTP_BUFFER_FLAG_REDUNDANT);
  guint64 now = dt__clock_now(jitterbuffer);
  if (now == GST_CLOCK_TIME_NONE) return;
  c->arrival(c->ctx, seqnum, timestamp, recovered, now);
}

static GstPadProbeReturn dt__on_arrival(GstPad *pad, GstPadProbeInfo *info, gpointer ud) {
  dt_webrtc_callbacks *c = (dt_webrtc_callbacks *)ud;
  GstElement *jitterbuffer = gst_pad_get_parent_element(pad);
  if (!jitterbuffer) return GST_PAD_PROBE_OK;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    dt__arrival(c, jitterbuffer, GST_PAD_PROBE_INFO_BUFFER(info));
  } else if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList *list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    for (guint i = 0; i < gst_buffer_list_length(list); i++) dt__arrival(c, jitterbuffer, gst_buffer_list_get(list, i));
  }
  gst_object_unref(jitterbuffer);
  return GST_PAD_PROBE_OK;
}

/// Reports every RTP packet reaching `jitterbuffer` to `c->arrival` (after RED was unwrapped:
/// a packet RED recovered arrives with the one that carried it).
static inline void dt_jitterbuffer_watch(GstElement *jitterbuffer, dt_webrtc_callbacks *c) {
  GstPad *sink = gst_element_get_static_pad(jitterbuffer, "sink");
  if (!sink) return;
  gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST, dt__on_arrival, c, NULL);
  gst_object_unref(sink);
}

static inline GstWebRTCDataChannel *dt_webrtc_create_data_channel(GstElement *w, const gchar *label) {
  GstWebRTCDataChannel *ch = NULL;
  g_signal_emit_by_name(w, "create-data-channel", label, NULL, &ch);
  return ch;
}

// MARK: Data channels

typedef struct dt_channel_callbacks {
  void *ctx;
  dt_event_cb event;   // 1 = open, 2 = closed
  dt_text_cb text;
  dt_bytes_cb bytes;
} dt_channel_callbacks;

static void dt__ch_open(GstWebRTCDataChannel *ch, gpointer ud) { (void)ch; dt_channel_callbacks *c = (dt_channel_callbacks *)ud; c->event(c->ctx, 1); }
static void dt__ch_close(GstWebRTCDataChannel *ch, gpointer ud) { (void)ch; dt_channel_callbacks *c = (dt_channel_callbacks *)ud; c->event(c->ctx, 2); }
static void dt__ch_text(GstWebRTCDataChannel *ch, gchar *s, gpointer ud) { (void)ch; dt_channel_callbacks *c = (dt_channel_callbacks *)ud; if (s) c->text(c->ctx, s); }
static void dt__ch_bytes(GstWebRTCDataChannel *ch, GBytes *b, gpointer ud) {
  (void)ch;
  dt_channel_callbacks *c = (dt_channel_callbacks *)ud;
  if (!b) return;
  gsize size = 0;
  const void *data = g_bytes_get_data(b, &size);
  c->bytes(c->ctx, data, size);
}

static inline dt_channel_callbacks *dt_channel_connect(GstWebRTCDataChannel *ch, const dt_channel_callbacks *cbs) {
  dt_channel_callbacks *c = g_new0(dt_channel_callbacks, 1);
  *c = *cbs;
  g_signal_connect_data(ch, "on-open", G_CALLBACK(dt__ch_open), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(ch, "on-close", G_CALLBACK(dt__ch_close), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(ch, "on-message-string", G_CALLBACK(dt__ch_text), c, NULL, (GConnectFlags)0);
  g_signal_connect_data(ch, "on-message-data", G_CALLBACK(dt__ch_bytes), c, NULL, (GConnectFlags)0);
  return c;
}

static inline void dt_channel_disconnect(GstWebRTCDataChannel *ch, dt_channel_callbacks *c) {
  g_signal_handlers_disconnect_matched(ch, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, c);
}

static inline gint dt_channel_ready_state(GstWebRTCDataChannel *ch) {
  gint v = 0;
  g_object_get(ch, "ready-state", &v, NULL);
  return v;
}

// MARK: Stats

typedef struct dt_stats {
  guint64 bytes_sent, bytes_received, packets_sent, packets_received;
  gint64 packets_lost;
  gdouble jitter, round_trip_time;
  gchar local_candidate_type[16], remote_candidate_type[16];
  gchar local_candidate_protocol[8];
  // Video, told apart by SSRC: webrtcbin 1.22 labels every stream `kind=video`. In: the SSRC
  // we send video with and those the peer's description announced for its video.
  guint32 video_ssrc;
  guint32 remote_video_ssrcs[8];
  guint remote_video_ssrc_count;
  // Out: our video stream (the counts the peer's RTCP feedback asked for) and theirs (what
  // we asked for); fraction lost and round trip from the peer's reports on our video.
  guint64 video_bytes_sent, video_bytes_received, video_packets_sent;
  gint64 video_packets_lost;
  guint64 nacks_received, plis_received, nacks_sent, plis_sent;
  gdouble video_fraction_lost, video_round_trip_time;
  // The peer's latest report on any of our streams: webrtcbin 1.22 keeps one report block per
  // remote source, so with bundle only one of our streams (often the audio) has one. All of
  // them share the path, so it measures the same congestion.
  gdouble path_fraction_lost;
  gint64 path_packets_lost;
} dt_stats;

static gboolean dt__is_remote_video(const dt_stats *out, guint32 ssrc) {
  for (guint i = 0; i < out->remote_video_ssrc_count && i < 8; i++)
    if (out->remote_video_ssrcs[i] == ssrc) return TRUE;
  return FALSE;
}

static gdouble dt__number(const GstStructure *s, const gchar *field) {
  const GValue *v = gst_structure_get_value(s, field);
  if (!v) return -1;
  if (G_VALUE_HOLDS_UINT64(v)) return (gdouble)g_value_get_uint64(v);
  if (G_VALUE_HOLDS_INT64(v)) return (gdouble)g_value_get_int64(v);
  if (G_VALUE_HOLDS_UINT(v)) return (gdouble)g_value_get_uint(v);
  if (G_VALUE_HOLDS_INT(v)) return (gdouble)g_value_get_int(v);
  if (G_VALUE_HOLDS_DOUBLE(v)) return g_value_get_double(v);
  return -1;
}

static gboolean dt__stat_entry(GQuark field, const GValue *value, gpointer ud) {
  (void)field;
  dt_stats *out = (dt_stats *)ud;
  if (!GST_VALUE_HOLDS_STRUCTURE(value)) return TRUE;
  const GstStructure *s = gst_value_get_structure(value);
  GstWebRTCStatsType type = 0;
  if (!gst_structure_get(s, "type", GST_TYPE_WEBRTC_STATS_TYPE, &type, NULL)) return TRUE;
  gdouble n;
  guint32 ssrc = 0;
  gboolean has_ssrc = gst_structure_get_uint(s, "ssrc", &ssrc);
  switch (type) {
  case GST_WEBRTC_STATS_OUTBOUND_RTP:
    if ((n = dt__number(s, "bytes-sent")) > 0) out->bytes_sent += (guint64)n;
    if ((n = dt__number(s, "packets-sent")) > 0) out->packets_sent += (guint64)n;
    if (has_ssrc && out->video_ssrc != 0 && ssrc == out->video_ssrc) {
      if ((n = dt__number(s, "bytes-sent")) > 0) out->video_bytes_sent += (guint64)n;
      if ((n = dt__number(s, "packets-sent")) > 0) out->video_packets_sent += (guint64)n;
      if ((n = dt__number(s, "nack-count")) > 0) out->nacks_received += (guint64)n;
      if ((n = dt__number(s, "pli-count")) > 0) out->plis_received += (guint64)n;
      if ((n = dt__number(s, "fir-count")) > 0) out->plis_received += (guint64)n;
    }
    break;
  case GST_WEBRTC_STATS_INBOUND_RTP:
    if ((n = dt__number(s, "bytes-received")) > 0) out->bytes_received += (guint64)n;
    if ((n = dt__number(s, "packets-received")) > 0) out->packets_received += (guint64)n;
    if ((n = dt__number(s, "packets-lost")) > 0) out->packets_lost += (gint64)n;
    if ((n = dt__number(s, "jitter")) >= 0) out->jitter = n;
    if (has_ssrc && dt__is_remote_video(out, ssrc)) {
      if ((n = dt__number(s, "bytes-received")) > 0) out->video_bytes_received += (guint64)n;
      if ((n = dt__number(s, "packets-lost")) > 0) out->video_packets_lost += (gint64)n;
      if ((n = dt__number(s, "nack-count")) > 0) out->nacks_sent += (guint64)n;
      if ((n = dt__number(s, "pli-count")) > 0) out->plis_sent += (guint64)n;
      if ((n = dt__number(s, "fir-count")) > 0) out->plis_sent += (guint64)n;
    }
    break;
  case GST_WEBRTC_STATS_REMOTE_INBOUND_RTP:
    if ((n = dt__number(s, "round-trip-time")) >= 0) out->round_trip_time = n;
    if ((n = dt__number(s, "fraction-lost")) >= 0) out->path_fraction_lost = n;
    if ((n = dt__number(s, "packets-lost")) >= 0) out->path_packets_lost = (gint64)n;
    if (has_ssrc && out->video_ssrc != 0 && ssrc == out->video_ssrc) {
      if ((n = dt__number(s, "fraction-lost")) >= 0) out->video_fraction_lost = n;
      if ((n = dt__number(s, "round-trip-time")) >= 0) out->video_round_trip_time = n;
    }
    break;
  // webrtcbin 1.22 reports candidate stats only for the selected pair.
  case GST_WEBRTC_STATS_LOCAL_CANDIDATE: {
    const gchar *t = gst_structure_get_string(s, "candidate-type");
    if (t) g_strlcpy(out->local_candidate_type, t, sizeof out->local_candidate_type);
    const gchar *protocol = gst_structure_get_string(s, "protocol");
    if (protocol) g_strlcpy(out->local_candidate_protocol, protocol, sizeof out->local_candidate_protocol);
    break;
  }
  case GST_WEBRTC_STATS_REMOTE_CANDIDATE: {
    const gchar *t = gst_structure_get_string(s, "candidate-type");
    if (t) g_strlcpy(out->remote_candidate_type, t, sizeof out->remote_candidate_type);
    break;
  }
  default:
    break;
  }
  return TRUE;
}

/// Fills `out` from a get-stats reply; `video_ssrc` and `remote_video_ssrcs` are read, not cleared.
static inline void dt_stats_read(GstPromise *p, dt_stats *out) {
  dt_stats in = *out;
  memset(out, 0, sizeof *out);
  out->video_ssrc = in.video_ssrc;
  memcpy(out->remote_video_ssrcs, in.remote_video_ssrcs, sizeof out->remote_video_ssrcs);
  out->remote_video_ssrc_count = in.remote_video_ssrc_count;
  out->jitter = -1;
  out->round_trip_time = -1;
  out->video_fraction_lost = -1;
  out->video_round_trip_time = -1;
  out->path_fraction_lost = -1;
  out->path_packets_lost = -1;
  const GstStructure *reply = gst_promise_get_reply(p);
  if (reply) gst_structure_foreach(reply, dt__stat_entry, out);
}

// MARK: Misc

/// What the peer's transport-wide congestion feedback (RTCP transport-cc, one report every few
/// packets) says of what this side sent, over rtpsession's last window.
typedef struct dt_twcc {
  gdouble loss_percent;          // of the packets the feedback covered
  gdouble bitrate_sent, bitrate_received;  // bits per second over the window
  gdouble packets_sent, packets_received;
  gdouble delta_of_delta;        // mean change of the inter-arrival delay, ns: > 0, a queue builds
} dt_twcc;

/// FALSE while no feedback came (the peer sends none, or nothing was sent yet).
static inline gboolean dt_webrtc_twcc(GstElement *webrtc, dt_twcc *out) {
  GstElement *rtpbin = gst_bin_get_by_name(GST_BIN(webrtc), "rtpbin");
  if (!rtpbin) return FALSE;
  GstElement *session = NULL;
  g_signal_emit_by_name(rtpbin, "get-session", 0u, &session);
  gst_object_unref(rtpbin);
  if (!session) return FALSE;
  GstStructure *s = NULL;
  g_object_get(session, "twcc-stats", &s, NULL);
  gst_object_unref(session);
  if (!s) return FALSE;
  out->loss_percent = dt__number(s, "packet-loss-pct");
  out->bitrate_sent = dt__number(s, "bitrate-sent");
  out->bitrate_received = dt__number(s, "bitrate-recv");
  out->packets_sent = dt__number(s, "packets-sent");
  out->packets_received = dt__number(s, "packets-recv");
  out->delta_of_delta = dt__number(s, "avg-delta-of-delta");
  gst_structure_free(s);
  return out->packets_sent > 0;
}

static inline void dt_gst_init(void) { gst_init(NULL, NULL); }

/// Sets a property from its string form (enums by nick, booleans as "true"/"false").
static inline void dt_set(gpointer object, const gchar *name, const gchar *value) {
  gst_util_set_object_arg(G_OBJECT(object), name, value);
}

static inline void dt_unref(gpointer object) { gst_object_unref(object); }
static inline void dt_ref_sink(gpointer object) { gst_object_ref_sink(object); }
static inline void dt_channel_ref(GstWebRTCDataChannel *ch) { g_object_ref(ch); }
static inline void dt_channel_unref(GstWebRTCDataChannel *ch) { g_object_unref(ch); }

static inline gboolean dt_set_state(GstElement *e, GstState state) {
  return gst_element_set_state(e, state) != GST_STATE_CHANGE_FAILURE;
}

/// Makes (and drops) a DTLS decoder: its first instance generates the process's DTLS
/// certificate, which otherwise costs the first call 0.1-0.6 s.
static inline void dt_pregenerate_dtls_certificate(void) {
  GstElement *e = gst_element_factory_make("dtlsdec", NULL);
  if (e) { gst_object_ref_sink(e); gst_object_unref(e); }
}

// ---- Releasing TURN allocations ----
// webrtcbin (1.22) frees its libnice agent without nice_agent_close_async(), so a closed
// connection leaves its relay allocations on the TURN server until their lifetime (600 s)
// runs out: a cost per call, and per losing pre-connect leg. Closing the agent first sends a
// Refresh with lifetime 0 for each allocation (RFC 8656 7.1) and waits for the answers.

static void dt__agent_closed(GObject *source, GAsyncResult *result, gpointer ud) {
  (void)source;
  (void)result;
  *(gboolean *)ud = TRUE;
}

static gboolean dt__close_timed_out(gpointer ud) {
  *(gboolean *)ud = TRUE;
  return G_SOURCE_REMOVE;
}

/// Deallocates the relays of `webrtc`'s ICE agent, waiting at most `timeout_ms` for the TURN
/// servers' answers. The agent must not be used afterwards: call it just before the pipeline
/// stops.
static inline void dt_webrtc_release_relays(GstElement *webrtc, guint timeout_ms) {
  GObject *ice = NULL;
  g_object_get(webrtc, "ice-agent", &ice, NULL);
  if (!ice) return;
  NiceAgent *agent = NULL;
  if (g_object_class_find_property(G_OBJECT_GET_CLASS(ice), "agent"))
    g_object_get(ice, "agent", &agent, NULL);
  g_object_unref(ice);
  if (!agent) return;
  // The agent calls back in the caller's thread-default context: a private one, iterated here.
  GMainContext *context = g_main_context_new();
  g_main_context_push_thread_default(context);
  gboolean closed = FALSE, timed_out = FALSE;
  nice_agent_close_async(agent, dt__agent_closed, &closed);
  GSource *timer = g_timeout_source_new(timeout_ms);
  g_source_set_callback(timer, dt__close_timed_out, &timed_out, NULL);
  g_source_attach(timer, context);
  while (!closed && !timed_out) g_main_context_iteration(context, TRUE);
  g_source_destroy(timer);
  g_source_unref(timer);
  g_main_context_pop_thread_default(context);
  g_main_context_unref(context);
  g_object_unref(agent);
}

/// Moves a file source's parser (`wavparse`, still PAUSED) to `position` ns: the file then plays
/// from there once the pipeline plays. The seek goes in at the parser's source pad, as a seek
/// from downstream would; its flush stops at the closed valve before the encoder.
static inline gboolean dt_file_source_seek(GstElement *parser, guint64 position) {
  GstPad *src = gst_element_get_static_pad(parser, "src");
  if (!src) return FALSE;
  GstEvent *seek = gst_event_new_seek(1.0, GST_FORMAT_TIME, (GstSeekFlags)(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE),
                                      GST_SEEK_TYPE_SET, (gint64)position, GST_SEEK_TYPE_NONE, 0);
  gboolean done = gst_pad_send_event(src, seek);
  gst_object_unref(src);
  return done;
}

static inline GstElement *dt_bin_get(GstElement *bin, const gchar *name) {
  return gst_bin_get_by_name(GST_BIN(bin), name);
}

static inline GstElement *dt_parse_launch(const gchar *description, gchar **error) {
  GError *err = NULL;
  GstElement *e = gst_parse_launch(description, &err);
  *error = NULL;
  if (err) {
    *error = g_strdup(err->message);
    g_error_free(err);
    if (e) { gst_object_unref(e); e = NULL; }
  }
  return e;
}

#endif
