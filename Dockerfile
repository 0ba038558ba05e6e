# syntax=docker/dockerfile:1
# Build: the Swift toolchain image, through the same script CI runs.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4-openssl-dev libssl-dev libsqlite3-dev libpq-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
# Package.swift declares the ServiceTests test target (with excludes under Tests/ServiceTests):
# SwiftPM refuses to load the package without it, even to build only the executable.
COPY Tests ./Tests
COPY scripts ./scripts
RUN ./scripts/build-release /out

# Run: slim Debian with only the libraries the binary links (libcurl, libcrypto, libsqlite3, libpq), CA roots,
# and the sqlite3 shell (backing up and inspecting the state database, see README "Where state lives").
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4 libssl3 libsqlite3-0 libpq5 libstdc++6 ca-certificates curl sqlite3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/download-service --shell /usr/sbin/nologin app \
 && mkdir -p /var/cache/download-service /var/lib/download-service/data /var/lib/download-service/state /shared \
 && chown -R app:app /var/cache/download-service /var/lib/download-service /shared \
 && chgrp -R 0 /var/cache/download-service /var/lib/download-service /shared \
 && chmod -R g=u /var/cache/download-service /var/lib/download-service /shared
COPY --from=build /out/bin/download-service /usr/local/bin/download-service
ENV DOWNLOAD_SERVICE_HOST=0.0.0.0 \
    DOWNLOAD_SERVICE_PORT=8080 \
    DOWNLOAD_SERVICE_CACHE_DIR=/var/cache/download-service \
    DOWNLOAD_SERVICE_DATA_DIR=/var/lib/download-service/data \
    DOWNLOAD_SERVICE_STATE_DIR=/var/lib/download-service/state
VOLUME ["/var/cache/download-service", "/var/lib/download-service"]
# A private CA: mount a PEM file (e.g. -v /etc/corp/ca.pem:/etc/download-service/ca.pem:ro) and set
# DOWNLOAD_SERVICE_CA_FILE=/etc/download-service/ca.pem; it is added to the system's roots.
# An upstream proxy: DOWNLOAD_SERVICE_UPSTREAM_PROXY=http://[user:password@]proxy:3128 and
# DOWNLOAD_SERVICE_NO_PROXY=hosts,*.suffix,CIDRs; HTTP(S)_PROXY variables are never used.
# Group 0 may write the areas too: an arbitrary UID in group root (OpenShift) runs as well.
USER 10001:10001
EXPOSE 8080
# Through a shell so the probe follows DOWNLOAD_SERVICE_PORT when it is overridden at run time.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
  CMD ["sh", "-c", "curl -fsS --noproxy '*' -o /dev/null \"http://127.0.0.1:${DOWNLOAD_SERVICE_PORT:-8080}/healthz\""]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/download-service"]
