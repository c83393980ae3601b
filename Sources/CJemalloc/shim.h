// jemalloc (Debian's libjemalloc-dev), linked into dialtone-server only: it replaces glibc's
// malloc for the whole process by being linked ahead of libc. Only mallctl is declared here, not
// <jemalloc/jemalloc.h>, whose malloc/free would clash with Glibc's in Swift.
#include <stddef.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
