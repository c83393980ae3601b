// The settings dialtone-server's jemalloc starts with (settings.c), for DialtoneAllocator to log
// and check. Only the server links this target, and only on Linux.
#ifndef DIALTONE_JEMALLOC_SETTINGS_H
#define DIALTONE_JEMALLOC_SETTINGS_H

/// The string jemalloc read at its start as `malloc_conf`: "key:value,key:value".
const char *dialtone_jemalloc_settings(void);

#endif
