#!/usr/bin/env bash
# A private CA and one certificate per Dask role (scheduler, worker, client), for dask-tls.yaml.
#
#   deploy/tls/make-certs.sh OUT_DIR [HOSTNAME ...]
#
# HOSTNAMEs (default: localhost 127.0.0.1) go into the certificates' subjectAltName. Keys are
# written mode 0600; keep the CA key (ca-key.pem) out of the cluster — pods need only ca.pem
# and their own role's certificate and key. In Kubernetes, load them into a Secret:
#   kubectl create secret generic dask-tls --from-file=OUT_DIR
set -euo pipefail
out="${1:?usage: make-certs.sh OUT_DIR [HOSTNAME ...]}"
shift
if [ "$#" -gt 0 ]; then hosts=("$@"); else hosts=(localhost 127.0.0.1); fi
days="${DAYS:-365}"
mkdir -p "$out"
umask 077

san=""
for h in "${hosts[@]}"; do
  if [[ "$h" =~ ^[0-9.]+$ ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
done
san="${san%,}"

openssl req -x509 -newkey rsa:3072 -nodes -days "$days" -subj "/CN=dr-scale Dask CA" \
  -keyout "$out/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
for role in scheduler worker client; do
  openssl req -newkey rsa:3072 -nodes -subj "/CN=dask-$role" \
    -keyout "$out/$role-key.pem" -out "$out/$role.csr" 2>/dev/null
  openssl x509 -req -in "$out/$role.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" -CAcreateserial \
    -days "$days" -out "$out/$role.pem" \
    -extfile <(printf "subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n" "$san") 2>/dev/null
  rm "$out/$role.csr"
done
rm -f "$out/ca.srl"
chmod 0644 "$out"/ca.pem "$out"/scheduler.pem "$out"/worker.pem "$out"/client.pem
echo "wrote CA and scheduler/worker/client certificates to $out"
