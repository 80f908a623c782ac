# ebdman, the operator image.
#
#   docker build -t ebdman:dev .
#
# Build stage: the same Debian 12 toolchain and -dev packages scripts/bootstrap
# uses; only the ebdman target is built (no tests, no control plane).
FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libcurl4-openssl-dev libssl-dev libcjson-dev libyaml-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore keeps .cache (control-plane binaries), build trees and .git out.
COPY . .
# With -Werror, as CI: scripts/test builds this same Release configuration
# with -Werror on Debian 12's gcc, the compiler of this build stage.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKCR_BUILD_TESTS=OFF -DKCR_WERROR=ON \
 && cmake --build /build --target ebdman

# Runtime stage: only the shared libraries ebdman links against, and the CA
# bundle (the in-cluster config uses the service account's ca.crt; the bundle
# is for out-of-cluster kubeconfigs and exec credential plugins).
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcurl4 libcjson1 libyaml-0-2 libmicrohttpd12 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/operator/ebdman/ebdman /ebdman
# The nonroot uid/gid of distroless images; matches runAsUser in
# config/manager/manager.yaml (the pod also sets runAsNonRoot).
USER 65532:65532
ENTRYPOINT ["/ebdman"]
