# syntax=docker/dockerfile:1
# The delaybridge sidecar image: the `delaybridge` CLI in a virtualenv, no PySpark
# (the reconciliation job needs its own image with the `spark` extra and Java).
#
#   docker build -t delaybridge:0.1.0 .
#   podman build --build-arg BASE_IMAGE=localhost/delaybridge-python:3.11 -t delaybridge:0.1.0 .
#
# BASE_IMAGE is any Debian-like image with Python 3.11+ and the venv module: the
# public python:3.11-slim by default, or the local Debian bookworm + python3 image
# that scripts/build-images makes where no registry is reachable (scripts/build-sidecar-image).
# Both stages use the same base, so the virtualenv's interpreter link stays valid.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
# `python3`, not `python`: Debian's own interpreter has only the former.
RUN python3 -m venv /opt/delaybridge
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so that a code change reuses this layer:
# the sidecar's and the `console` extra's (the web console runs from this image too, as
# the chart's optional console Deployment; docs/dependencies.md, "The console").
# Behind a TLS-intercepting proxy, pass its CA bundle as the optional build secret
# `pip_cert` (--secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt); it is
# used for the downloads only and is not stored in any layer.
COPY pyproject.toml ./
RUN --mount=type=secret,id=pip_cert \
    if [ -f /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["console"]))' > requirements.txt \
 && /opt/delaybridge/bin/pip install --quiet -r requirements.txt
# The compiled hot path (docs/dependencies.md, "The compiled hot path"): a C compiler
# and Python's headers in this stage only, and mypy (whose mypyc compiles) in a
# throw-away virtualenv. Where the package mirror is unreachable the image still builds
# and runs the same code as pure Python (`delaybridge version` below says which).
RUN --mount=type=secret,id=pip_cert \
    if [ -f /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && { { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
          gcc libc6-dev python3-dev >/dev/null && python3 -m venv /opt/build-tools \
        && /opt/build-tools/bin/pip install --quiet "mypy>=1.13"; } \
      || echo "no compiler toolchain: the image runs the pure-Python hot path"; }
# Then the package itself, as a wheel (no editable install, no source tree in the image),
# with delaybridge_compiled/ (the extension modules) in it when they built.
COPY . ./
RUN --mount=type=secret,id=pip_cert \
    if [ -f /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && constraints="" \
 && if [ -f constraints.txt ]; then constraints="-c constraints.txt"; fi \
 && if [ -x /opt/build-tools/bin/python ]; then \
      /opt/build-tools/bin/python -m delaybridge.tools.build_compiled --dest /src || true; fi \
 && /opt/delaybridge/bin/pip wheel --quiet --no-deps --wheel-dir /wheels . \
 && /opt/delaybridge/bin/pip install --quiet $constraints "$(ls /wheels/delaybridge-*.whl)[console]" \
 && /opt/delaybridge/bin/python -c 'import importlib.util as u; assert u.find_spec("pyspark") is None, "PySpark must not be in the sidecar image"' \
 && /opt/delaybridge/bin/delaybridge --help > /dev/null \
 && /opt/delaybridge/bin/delaybridge console --help > /dev/null \
 && /opt/delaybridge/bin/delaybridge version \
 && /opt/delaybridge/bin/pip uninstall --quiet --yes pip setuptools

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="delaybridge" \
      org.opencontainers.image.description="Arbitrary-delay and scheduled messages for Apache Kafka (sidecar)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# uid/gid 10001: outside the range of system and first login users, matching the
# Helm chart's runAsUser and fsGroup. The store lives under /var/lib/delaybridge.
RUN groupadd --system --gid 10001 delaybridge \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /var/lib/delaybridge --shell /usr/sbin/nologin delaybridge \
 && mkdir -p /var/lib/delaybridge /etc/delaybridge \
 && chown 10001:10001 /var/lib/delaybridge \
 && chmod 0750 /var/lib/delaybridge \
 && printf '%s\n' \
      '# Default config of the delaybridge image. Mount your own over /etc/delaybridge, or' \
      '# override with DELAYBRIDGE_<SECTION>__<KEY> variables, e.g.' \
      '# DELAYBRIDGE_KAFKA__BOOTSTRAP_SERVERS. Listening on 0.0.0.0 requires' \
      '# DELAYBRIDGE_HTTP__ADMIN_TOKEN.' \
      'kafka:' \
      '  bootstrap_servers: 127.0.0.1:9092' \
      'store:' \
      '  data_dir: /var/lib/delaybridge' \
      'http:' \
      '  host: 0.0.0.0' \
      '  port: 8080' \
      > /etc/delaybridge/config.yaml
COPY --from=build /opt/delaybridge /opt/delaybridge
# Byte code was compiled at install time; nothing is written outside the store and
# /tmp, so the container runs with a read-only root filesystem.
# PATH spelled out: an imported base image (podman import) may define none.
ENV PATH=/opt/delaybridge/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/delaybridge
EXPOSE 8080
# No HEALTHCHECK: Kubernetes uses the chart's probes on /healthz and /readyz, and the
# OCI image format podman builds by default has no HEALTHCHECK field.
ENTRYPOINT ["delaybridge"]
CMD ["run", "--config", "/etc/delaybridge/config.yaml"]
