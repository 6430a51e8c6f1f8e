# edl: one binary. go-nvml needs cgo, so build with cgo and ship on a glibc base.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o /out/edl ./cmd/edl

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/edl edl
COPY --from=build /out/edl /usr/local/bin/edl
USER edl
WORKDIR /var/lib/edl
ENTRYPOINT ["edl"]
