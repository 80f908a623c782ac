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
      libgnutls28-dev \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore keeps .cache (control-plane binaries), build trees and .git out.
COPY . .
# With -Werror, as CI: scripts/test builds this same Release configuration
# with -Werror on Debian 12's gcc, the compiler of this build stage.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKCR_BUILD_TESTS=OFF -DKCR_WERROR=ON \
 && cmake --build /build --target ebdman

# The image's files: ebdman, the shared libraries it loads, the loader and the
# CA bundle - what scripts/image packs without Docker, made by the same script.
RUN scripts/image --rootfs /rootfs --binary /build/operator/ebdman/ebdman

# Runtime stage: those files only (no shell, no package manager). In a Pod the
# in-cluster config uses the ServiceAccount's ca.crt; the bundle is for
# out-of-cluster kubeconfigs and exec credential plugins.
FROM scratch
COPY --from=build /rootfs /
# The nonroot uid/gid of distroless images; matches runAsUser in
# config/manager/manager.yaml (the pod also sets runAsNonRoot).
USER 65532:65532
ENTRYPOINT ["/ebdman"]
