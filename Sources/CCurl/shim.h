#include <curl/curl.h>

// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are C variadics Swift cannot call.
typedef size_t (*dt_curl_data_cb)(char *, size_t, size_t, void *);
static inline CURLcode dt_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode dt_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode dt_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode dt_curl_setopt_cb(CURL *h, CURLoption o, dt_curl_data_cb f) { return curl_easy_setopt(h, o, f); }
static inline CURLMcode dt_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLcode dt_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode dt_curl_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

// The multi socket interface: libcurl says which sockets to watch and when to call back, so that
// a transfer is driven only when its socket is ready (curl_multi_perform instead polls every
// transfer's socket on every call: O(transfers) system calls per pass on one HTTP/2 connection).
typedef int (*dt_curl_socket_cb)(CURL *, curl_socket_t, int, void *, void *);
typedef int (*dt_curl_timer_cb)(CURLM *, long, void *);
static inline CURLMcode dt_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode dt_curl_multi_setopt_socket_cb(CURLM *m, dt_curl_socket_cb f) {
  return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
}
static inline CURLMcode dt_curl_multi_setopt_timer_cb(CURLM *m, dt_curl_timer_cb f) {
  return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
}
