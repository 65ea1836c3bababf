#!/usr/bin/env bash
# Verifies a Tollgate evidence bundle offline with standard tools only: bash, tar, jq, sha256sum, base64 and
# openssl 3. It checks the manifest's signature, that each key file holds the key its name says, every record
# (its canonical body, hash, seq, prev_hash link and signature), the manifest's count and head after the window,
# and every file's SHA-256. Prints "OK: N records, seq A..B" and exits 0, or "BROKEN: " and the first broken
# record or file and exits 1; 2 on bad usage. docs/evidence.md explains each step.
#
#   scripts/verify-evidence-bundle.sh evidence_bundle-acme-20261123-0900.tar.gz
set -euo pipefail

[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 <bundle.tar.gz>" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
broken() { echo "BROKEN: $*"; exit 1; }

mkdir "$work/b"
tar -xzf "$1" -C "$work/b" 2>/dev/null || broken "$1: not a readable .tar.gz"
cd "$work/b"
[ -f manifest.json ] && [ -f manifest.sig ] || broken "manifest.json or manifest.sig is missing"

# base64url (no padding) to bytes.
b64url() { local s; s=$(printf '%s' "$1" | tr '_-' '/+'); while (( ${#s} % 4 )); do s+='='; done; printf '%s' "$s" | base64 -d 2>/dev/null; }
# signed <kid> <file of the 32 digest bytes> <signature, base64url>: Ed25519 with keys/<kid>.pem.
signed() {
  [ -f "keys/$1.pem" ] && b64url "$3" > "$work/sig.bin" &&
    openssl pkeyutl -verify -pubin -inkey "keys/$1.pem" -rawin -in "$2" -sigfile "$work/sig.bin" >/dev/null 2>&1
}

# 1. The manifest, signed: Ed25519 over the SHA-256 of its bytes, by the key it names.
kid=$(jq -r .kid manifest.json 2>/dev/null) || broken "manifest.json: not valid JSON"
openssl dgst -sha256 -binary manifest.json > "$work/digest.bin"
signed "$kid" "$work/digest.bin" "$(cat manifest.sig)" || broken "manifest.json: its signature (manifest.sig) does not verify with key $kid"

# 2. Each key file holds the key its name says: the start of the SHA-256 of the key, base64url.
for pem in keys/*.pem; do
  id=$(openssl pkey -pubin -in "$pem" -outform DER 2>/dev/null | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | cut -c1-16) || true
  [ "keys/$id.pem" = "$pem" ] || broken "$pem: holds another key than its name says"
done

# 3. Every record, bodies.jsonl and records.jsonl line by line.
expected=$(jq -r .head_before.seq manifest.json)
prev=$(jq -r .head_before.hash manifest.json)
n=0
exec 3<bodies.jsonl 4<records.jsonl
while IFS= read -r body <&3; do
  IFS= read -r record <&4 || broken "records.jsonl: fewer lines than bodies.jsonl"
  expected=$((expected + 1)) n=$((n + 1))
  # From the body (what the hash covers): seq, id, prev_hash; from the record: hash, signature, kid; and
  # whether the record's other fields are its body's.
  IFS=$'\x1f' read -r seq id link hash sig kid same < <(printf '%s\n%s\n' "$body" "$record" | jq -rs \
    '[.[0].seq, .[0].id, .[0].prev_hash, .[1].hash, .[1].signature, .[1].kid, (.[0] == (.[1] | del(.hash, .signature, .kid)))] | map(tostring) | join("\u001f")' 2>/dev/null) || true
  at="record ${seq:-?} (id ${id:-?})"
  [ "$same" = true ] || broken "$at: its fields in records.jsonl differ from its canonical body"
  [ "$(printf '%s' "$body" | sha256sum | cut -c1-64)" = "$hash" ] || broken "$at: hash does not match its body"
  [ "$seq" = "$expected" ] || broken "$at: expected seq $expected: a record before it is missing or out of order"
  [ "$link" = "$prev" ] || broken "$at: prev_hash does not link to the record before"
  printf '%s' "$body" | openssl dgst -sha256 -binary > "$work/digest.bin"
  signed "$kid" "$work/digest.bin" "$sig" || broken "$at: signature does not verify with key $kid"
  prev=$hash
done
IFS= read -r _ <&4 && broken "records.jsonl: more lines than bodies.jsonl"

# 4. The manifest's count and the head after the window.
count=$(jq -r .records.count manifest.json)
[ "$n" -ge "$count" ] || broken "records.jsonl: the manifest lists $count records, the bundle holds $n: records from seq $((expected + 1)) are missing"
[ "$n" -eq "$count" ] || broken "records.jsonl: holds $n records, the manifest lists $count"
[ "$prev" = "$(jq -r .head_after.hash manifest.json)" ] || broken "records.jsonl: the last record is not the manifest's head after the window"

# 5. Every file's SHA-256, as the manifest lists them.
jq -r '.files | to_entries[] | "\(.value)  \(.key)"' manifest.json | sha256sum -c --quiet - >"$work/sums" 2>&1 ||
  broken "$(sed -n 's/: FAILED.*$//p' "$work/sums" | head -n 1): does not match its SHA-256 in the manifest"

if [ "$n" -eq 0 ]; then
  echo "OK: 0 records (none created in the window; the chain stood at seq $(jq -r .head_after.seq manifest.json))"
else
  echo "OK: $n records, seq $(jq -r .records.first_seq manifest.json)..$(jq -r .records.last_seq manifest.json)"
fi
