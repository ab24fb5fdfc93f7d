#!/usr/bin/env bash
# Makes a CA and certificates for a dev or test cluster with the openssl command line
# (docs/security.md, "Setting up TLS").
#
#   scripts/make-certs.sh DIR NAME [NAME ...] [--days N] [--ca-cn CN]
#
# DIR/ca.pem and DIR/ca.key: the cluster's CA, made unless DIR/ca.pem exists (so more
# names can be added later). For each NAME: DIR/NAME.pem (certificate) and DIR/NAME.key
# (private key, mode 600), signed by the CA, with NAME as its common name and subject
# alternative names NAME, localhost and 127.0.0.1. A node's certificate must carry its
# member name ([node] id); a client's name is free.
#
# For production, keep ca.key off the nodes: it signs new members.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

days=825
ca_cn="dueq cluster CA"
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage 0 ;;
        --days) days="$2"; shift 2 ;;
        --ca-cn) ca_cn="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
[[ ${#args[@]} -ge 2 ]] || usage 2
dir="${args[0]}"
names=("${args[@]:1}")
command -v openssl > /dev/null || { echo "make-certs.sh: openssl is not installed" >&2; exit 1; }
mkdir -p "$dir"
umask 077

if [[ ! -f "$dir/ca.pem" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" -subj "/CN=$ca_cn" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2> /dev/null
    echo "made CA $dir/ca.pem ($ca_cn)"
fi

for name in "${names[@]}"; do
    ext="$(mktemp)"
    trap 'rm -f "$ext"' EXIT
    printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
        "$name" > "$ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2> /dev/null
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -out "$dir/$name.pem" -days "$days" -extfile "$ext" 2> /dev/null
    rm -f "$dir/$name.csr" "$ext"
    chmod 644 "$dir/$name.pem"
    echo "made $dir/$name.pem and $dir/$name.key (CN=$name, valid $days days)"
done
chmod 644 "$dir/ca.pem"
