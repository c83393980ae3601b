#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: sqlite copies the bound bytes at once.
static inline void (*dt_sqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }
