# Sourced by the plugin executables .ci/build-pulumi installs: sets PY, the Python interpreter of the
# project's environment (it must have the `pulumi` SDK and this project installed). In order:
# $PULUMI_PYTHON_CMD, the active virtualenv ($VIRTUAL_ENV), python3 on PATH.
if [ -n "${PULUMI_PYTHON_CMD:-}" ]; then
  PY="$PULUMI_PYTHON_CMD"
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  PY="$VIRTUAL_ENV/bin/python"
else
  PY=python3
fi
