# One environment under test. Rendered by harness/envs/images.py from an EnvSpec; the tag of the
# built image is a hash of this text once rendered plus every file it copies.
# Layer order is deliberate: base, CA, uv, interpreter, then one layer per requirement (torch
# first), so changing one package rebuilds only the layers after it.
FROM ${base}

# A TLS-intercepting proxy's CA, at a path the distribution's ca-certificates never rewrites.
COPY ca.pem /usr/local/share/ml-compat-harness/ca.pem
ENV SSL_CERT_FILE=/usr/local/share/ml-compat-harness/ca.pem \
    PIP_CERT=/usr/local/share/ml-compat-harness/ca.pem \
    REQUESTS_CA_BUNDLE=/usr/local/share/ml-compat-harness/ca.pem \
    UV_PYTHON_DOWNLOADS=never \
    UV_NO_CACHE=1 \
    UV_LINK_MODE=copy

COPY uv /usr/local/bin/uv
RUN ${python_setup}
RUN uv venv --quiet --python python${python} /opt/env
ENV VIRTUAL_ENV=/opt/env PATH=/opt/env/bin:$$PATH
${install_layers}
