# ray-service image: a static binary on an empty base, run as a non-root user.
# The build stage runs `make build`, the same command `make test` and CI build the binary with.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

# The runtime image: the binary, CA certificates to verify the apiserver and Prometheus, and a passwd
# entry for the unprivileged user. No shell, no package manager, no build tools.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /src/bin/ray-service /ray-service
COPY --from=build /src/build/passwd /etc/passwd
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/ray-service"]
