import DialtoneCommandLine
import Foundation

private let media: [CommandOption] = [
  .value("server", "the Dialtone server, e.g. http://127.0.0.1:8080"),
  .value("token", "this device's client token (dialtone token)"),
  .value("audio", "tone (default), silence, or a WAV file to send"),
  .value("tone-frequency", "the tone's frequency in Hz (default 440)"),
  .value("record", "write what is heard to this WAV file, against the clock (silence for what never arrived in time)"),
  .value(
    "audio-profile",
    "change Dialtone's audio settings, for comparisons: fec=0|1, dtx=0|1, red=0|1, red-distance=N, ptime=MS, "
      + "bitrate=BPS, jitter-buffer=adaptive|MS (e.g. red=0,ptime=40)"),
  .value(
    "video",
    "a video call (1:1 or group) with this camera: a test pattern (smpte, ball, red, green, blue, ...) or a video file"),
  .value("camera", "a camera (pattern or file) for an audio call, sent once it is upgraded (stdin: video on)"),
  .value("video-size", "the camera's size, WIDTHxHEIGHT (default 640x360)"),
  .value("video-fps", "the camera's frame rate (default 30)"),
  .value("video-codec", "vp8 (default) or h264: what this side sends and offers; answers take it if offered"),
  .value(
    "record-video",
    "write the video received in a 1:1 call to this file, as sent (WebM for VP8, MPEG-TS for H.264)"),
  .value("duration", "hang up this many seconds after connecting (default: stay until ^C or the other side hangs up)"),
  .flag("relay-only", "use TURN relay candidates only"),
  .flag("no-trickle", "gather every candidate before sending the offer or answer (the slow baseline)"),
  .flag(
    "preconnect", "connect ICE and DTLS while the phone rings, media held until Answer (protocol.md 11; the default)"),
  .flag("no-preconnect", "negotiate nothing before Answer (the flow of clients without pre-connect)"),
  .flag(
    "multistream", "group calls: receive everyone on one subscriber connection (protocol.md 20.9; the default)"),
  .flag("no-multistream", "group calls: receive each participant on a connection of their own"),
  .flag(
    "no-private-preconnect",
    "a ringing callee's leg gathers every candidate, not only TURN relays (the caller then sees its addresses)"),
  .flag("json", "print events as JSON lines"),
  .value(
    "log-level", "write the SDK's log to stderr from this level on: debug, info, warning or error (default: none)"),
  .value(
    "quality-interval",
    "also send the server a quality report every this many seconds while connected (default: at the end only)"),
  .flag("no-quality-report", "send the server no quality report at all"),
]

private let commands: [Subcommand] = [
  Subcommand(
    "token", "mint a client token, as an app backend would",
    options: [
      .value("user", "the user id (required)"),
      .value("device", "the device id claim"),
      .value("name", "the display name claim"),
      .value("ttl", "lifetime in seconds (default 3600)"),
      .value("secret", "the server's auth secret (or env DIALTONE_AUTH_SECRET)"),
      .value("data-dir", "read the secret a server generated there (default ./data, or env DIALTONE_DATA_DIR)"),
    ], run: TokenCommand.run),
  Subcommand(
    "call", "dial a user and talk; lines typed on stdin go over the data channel",
    options: [.value("to", "the user to call (required)")] + media, run: SoftphoneCommand.call),
  Subcommand(
    "answer", "wait for a call (1:1 or group) and answer it",
    options: [.flag("auto", "answer the first call at once")] + media, run: SoftphoneCommand.answer),
  Subcommand(
    "group call", "start a group call and ring its members (--record writes one WAV per participant)",
    options: [
      .value("to", "the members to ring, comma-separated (required)"),
      .value("title", "the call's title, shown by the ringing devices"),
      .flag("end-for-all", "end the call for everyone when this device hangs up"),
    ] + media, run: SoftphoneCommand.groupCall),
  Subcommand(
    "group join", "join a group call you are a member of (a ring you missed, or again after leaving)",
    options: media, positional: "call-id", run: SoftphoneCommand.groupJoin),
  Subcommand(
    "room join", "join (or start) the call of an app-defined room; nobody rings",
    options: media, positional: "name", run: SoftphoneCommand.roomJoin),
]

private let footer = """
  Exit status: 0 completed, 1 error, 2 usage, 3 declined, 4 busy, 5 missed, 6 failed (ICE or
  connection lost, no media ever arrived, the media server failed), 7 cancelled, 8 answered
  (joined) elsewhere, 9 removed from a group call by its owner.
  During a 1:1 call, stdin lines are commands or chat: "camera off" / "camera on" (no
  renegotiation), "video on" / "video off" (start or stop sending video, renegotiated),
  "hold" / "unhold" (the microphone off, and the other side told), "video count"; any other
  line goes over the data channel. During a group call: "mute",
  "unmute", "video count" (the frames decoded from each participant so far), "audio count"
  (the bytes of audio decoded from each participant so far, and the peer connections made), "invite bob,carol" (ring more
  people into the call), "remove bob" (the call's owner takes bob out of it).
  Benchmarks are a separate executable: dialtone-bench.
  """

exit(await Subcommand.main("dialtone", commands, footer: footer))
