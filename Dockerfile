# erplab's container image (used by `erplab k8s render --image`): one static
# binary on distroless "static", run as the non-root numeric user 65532.
#
# erplab needs cgo: pg_query_go (the SQL parser of rewrite/proxy/doctor) is
# PostgreSQL's C parser. The build stage compiles it against musl and links
# everything statically (netgo and osusergo keep net and os/user in pure Go,
# so no libc resolver is needed at run time), then refuses a binary that
# still asks for a dynamic loader.
#
#   docker build -t registry.example/erplab:0.1.0 --build-arg VERSION=0.1.0 .
#
# The image holds erplab only: no pgbench, psql or perf (`erplab run`, `init`
# and `merge` need none of them; vs-pgbench, profile and the throwaway server
# are not for pods).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-alpine AS build
RUN apk add --no-cache gcc musl-dev binutils
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0-dev
RUN CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
        -ldflags "-s -w -X main.version=${VERSION} -linkmode external -extldflags -static" \
        -o /out/erplab ./cmd/erplab \
    && ! readelf -l /out/erplab | grep -q 'program interpreter' \
    && /out/erplab version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/erplab /usr/local/bin/erplab
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/erplab"]
