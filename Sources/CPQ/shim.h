#ifndef CPQ_SHIM_H
#define CPQ_SHIM_H
// libpq, PostgreSQL's C client (Debian libpq-dev): the cluster state store (`DownloaderEngine/Cluster`).
#include <libpq-fe.h>
#endif
