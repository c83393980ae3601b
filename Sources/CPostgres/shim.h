#include <libpq-fe.h>

// The PG_DIAG_* field codes are character-literal macros, which Swift does not import.
static inline int dt_pg_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }
static inline int dt_pg_diag_message_primary(void) { return PG_DIAG_MESSAGE_PRIMARY; }
static inline int dt_pg_diag_message_detail(void) { return PG_DIAG_MESSAGE_DETAIL; }

// libpq prints server notices (e.g. "relation already exists, skipping") to stderr by default.
static inline void dt_pg_ignore_notice(void *arg, const char *message) { (void)arg; (void)message; }
static inline void dt_pg_silence_notices(PGconn *conn) { PQsetNoticeProcessor(conn, dt_pg_ignore_notice, NULL); }
