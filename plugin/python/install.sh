#!/usr/bin/env bash
# Installs what the Python plugin needs from Debian's apt when missing:
# python3-grpcio, python3-grpc-tools (protoc for Python) and
# python3-protobuf. `make test` and .ci/run call it; it is also the first
# step of the README's walkthrough. Prints the interpreter to use.
set -euo pipefail
python=/usr/bin/python3
have() { [[ -x $python ]] && "$python" -c 'import grpc, grpc_tools.protoc, google.protobuf' 2>/dev/null; }
if ! have; then
	if ((EUID != 0)); then
		echo "plugin/python/install.sh: python3-grpcio, python3-grpc-tools or python3-protobuf missing; run as root to apt-get install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-grpcio python3-grpc-tools python3-protobuf >/dev/null
	have || { echo "plugin/python/install.sh: installed, yet $python cannot import grpc and grpc_tools" >&2; exit 1; }
fi
echo "$python"
