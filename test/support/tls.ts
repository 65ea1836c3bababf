import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway certificate authority and a server certificate it signed, all PEM. */
export interface TestTls {
  /** The CA's certificate: what a client trusts (`new OutboundHttp({ ca })`). */
  ca: string;
  /** The server's certificate, valid for 127.0.0.1, ::1 and localhost. */
  cert: string;
  /** The server certificate's private key. */
  key: string;
}

let cached: TestTls | undefined;

/**
 * A test CA and a server certificate for loopback stand-ins (HTTPS where the spec requires it), made with
 * the openssl command line in a temporary folder (removed at once) and kept for the rest of the test
 * process. Nothing here is trusted by anything but the clients a test gives `ca` to.
 */
export function testTls(): TestTls {
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-test-tls-'));
  try {
    const at = (name: string) => join(dir, name);
    const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl('req', '-x509', ...ecKey, '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '7', '-subj', '/CN=Tollgate Test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
    openssl('req', ...ecKey, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=localhost');
    writeFileSync(
      at('server.ext'),
      'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n',
    );
    openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial',
      '-out', at('server.pem'), '-days', '7', '-extfile', at('server.ext'));
    cached = { ca: readFileSync(at('ca.pem'), 'utf8'), cert: readFileSync(at('server.pem'), 'utf8'), key: readFileSync(at('server.key'), 'utf8') };
    return cached;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
