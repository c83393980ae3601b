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
