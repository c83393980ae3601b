#include <libwebsockets.h>
#include <sys/timerfd.h>
#include <unistd.h>

// LWS_PRE is a macro expression Swift cannot import.
static inline size_t dt_lws_pre(void) { return LWS_PRE; }


// The opaque user pointer carries our connection id; these avoid pointer-from-integer casts in Swift.
static inline void dt_lws_set_id(struct lws *wsi, uint64_t id) {
  lws_set_opaque_user_data(wsi, (void *)(uintptr_t)id);
}
static inline uint64_t dt_lws_get_id(struct lws *wsi) {
  return (uint64_t)(uintptr_t)lws_get_opaque_user_data(wsi);
}

// Stopping a libuv-backed context: lws_service() runs uv_run() until no handles remain, so the
// first lws_context_destroy() must happen inside the loop (it closes the uv handles); the caller
// then destroys again after lws_service() returns. A sul timer runs it outside any wsi callback.
struct dt_stopper {
  lws_sorted_usec_list_t sul;
  struct lws_context *ctx;
};
static void dt_stopper_fire(lws_sorted_usec_list_t *sul) {
  struct dt_stopper *stopper = lws_container_of(sul, struct dt_stopper, sul);
  lws_context_destroy(stopper->ctx);
}
static inline void dt_lws_schedule_stop(struct lws_context *ctx, struct dt_stopper *stopper) {
  memset(stopper, 0, sizeof(*stopper));
  stopper->ctx = ctx;
  lws_sul_schedule(ctx, 0, &stopper->sul, dt_stopper_fire, 1);
}

// Adopts an accepted socket as a raw socket of the context's vhost, bound to the "dialtone"
// protocol, with TLS when the vhost has a certificate. On failure lws has closed the socket.
static inline struct lws *dt_lws_adopt_raw(struct lws_context *ctx, int fd, int tls) {
  struct lws_vhost *vhost = lws_get_vhost_by_name(ctx, "default");
  if (!vhost) {
    close(fd);
    return NULL;
  }
  lws_sock_file_fd_type desc;
  desc.sockfd = fd;
  return lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_SOCKET | (tls ? LWS_ADOPT_ALLOW_SSL : 0), desc,
                                    "dialtone", NULL);
}

// A one-shot timer the network loop itself waits for: a timerfd adopted as a raw file, so that
// its expiry arrives as LWS_CALLBACK_RAW_RX_FILE on the loop's thread (no timer thread, no
// hop). Returns the wsi, or NULL (the descriptor is then closed).
static inline struct lws *dt_lws_adopt_timer(struct lws_context *ctx) {
  struct lws_vhost *vhost = lws_get_vhost_by_name(ctx, "default");
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return NULL;
  if (!vhost) {
    close(fd);
    return NULL;
  }
  lws_sock_file_fd_type desc;
  desc.filefd = fd;
  struct lws *wsi = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, desc, "dialtone", NULL);
  if (!wsi) close(fd);
  return wsi;
}

// Arms the timer of `wsi` to expire once, `nanoseconds` from now (at least 1 µs); an expiry not
// yet read is dropped (the descriptor is not readable until the new one).
static inline int dt_lws_timer_arm(struct lws *wsi, uint64_t nanoseconds) {
  if (nanoseconds < 1000) nanoseconds = 1000;
  struct itimerspec spec = {0};
  spec.it_value.tv_sec = (time_t)(nanoseconds / 1000000000u);
  spec.it_value.tv_nsec = (long)(nanoseconds % 1000000000u);
  return timerfd_settime(lws_get_socket_fd(wsi), 0, &spec, NULL);
}

// Stops the timer of `wsi`. Like arming, this also consumes an expiry: timerfd_settime resets
// the count of expirations, so the descriptor is no longer readable. An expiry is therefore
// consumed by the arming or disarming that follows it, with no read of the descriptor.
static inline int dt_lws_timer_disarm(struct lws *wsi) {
  struct itimerspec spec = {0};
  return timerfd_settime(lws_get_socket_fd(wsi), 0, &spec, NULL);
}
