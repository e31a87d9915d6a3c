"""Points TensorFlow's own GCS file system (`tf.io.gfile` on gs://) at the GCS emulator.

TF 2.16's GCS file system (tsl/platform/cloud/gcs_file_system.cc, built into
libtensorflow_framework) has its endpoints compiled in (https://www.googleapis.com/storage/v1/,
https://storage.googleapis.com/) and no emulator setting; tensorflow-io-gcs-filesystem, which
honours CLOUD_STORAGE_EMULATOR_ENDPOINT, crashes TF 2.16 with a segmentation fault on the first
gs:// call (TF_USE_MODULAR_FILESYSTEM=1, checked here). What TF does honour: libcurl's
`https_proxy`, `CURL_CA_BUNDLE` (a CA file), and GOOGLE_AUTH_TOKEN_FOR_TESTING (a fixed bearer
token instead of the metadata server). So this is an HTTPS proxy on loopback (and a stand-in GCE metadata server, below): it accepts CONNECT
to the Google hosts, speaks TLS to TF with a certificate from its own throwaway CA, and forwards
each request unchanged (path, query, headers, body) to the emulator over plain HTTP.

Run: python gcs_proxy.py PORT EMULATOR_URL CA_FILE (CA_FILE is written; TF must trust it).
"""

import datetime
import http.client
import http.server
import json
import socketserver
import ssl
import sys
import tempfile
import urllib.parse

HOSTS = ["www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com"]
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


def write_certificates(ca_file: str):
    """A CA (written to `ca_file`) and a server certificate for HOSTS signed by it; returns the
    server's (certificate file, key file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject, key, issuer, issuer_key, extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, server_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = certificate(
        "test CA", ca_key, "test CA", ca_key, [(x509.BasicConstraints(True, None), True)]
    )
    names = x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS])
    server = certificate(HOSTS[0], server_key, "test CA", ca_key, [(names, False)])
    pem = serialization.Encoding.PEM
    with open(ca_file, "wb") as f:
        f.write(ca.public_bytes(pem))
    cert_file = tempfile.NamedTemporaryFile(suffix=".pem", delete=False)
    cert_file.write(server.public_bytes(pem))
    cert_file.close()
    key_file = tempfile.NamedTemporaryFile(suffix=".key", delete=False)
    key_file.write(
        server_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_file.close()
    return cert_file.name, key_file.name


class Forwarder(http.server.BaseHTTPRequestHandler):
    """One TLS connection from TF: each request forwarded to the emulator as it came."""

    protocol_version = "HTTP/1.1"
    upstream = None  # the emulator's (host, port)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if not size:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _empty_media_upload_as_multipart(self, headers: dict) -> bytes:
        """gcp-storage-emulator fails (TypeError, 500) on an empty `uploadType=media` body, which
        is how TF writes a directory marker: send the same empty object as a multipart upload."""
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        name = query.pop("name")[0]
        query["uploadType"] = ["multipart"]
        self.path = url._replace(query=urllib.parse.urlencode(query, doseq=True)).geturl()
        boundary = "gcs-proxy-boundary"
        headers["Content-Type"] = f'multipart/related; boundary="{boundary}"'
        return (
            f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
            + json.dumps({"name": name})
            + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
            + f"\r\n--{boundary}--\r\n"
        ).encode()

    def _forward(self):
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if not body and self.command == "POST" and "uploadType=media" in self.path:
            body = self._empty_media_upload_as_multipart(headers)
        headers["Content-Length"] = str(len(body))
        # The emulator builds resumable-upload session URLs from Host: make them its own, to
        # turn them back into the Google host's below (TF sends the session's PUT chunked, with
        # a Content-Length too, which the emulator misreads: _body decodes it for it).
        emulator = "http://{}:{}".format(*self.upstream)
        headers["Host"] = emulator[len("http://") :]
        connection = http.client.HTTPConnection(*self.upstream, timeout=120)
        connection.request(self.command, self.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() == "location":  # a resumable-upload session: through here too
                value = value.replace(emulator, "https://" + self.headers["Host"])
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        connection.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

    def log_message(self, *args):
        pass


# The GCE metadata server's answers google-auth needs for default credentials
# (google/auth/compute_engine/_metadata.py), so that Beam's gcsio, which insists on credentials,
# gets a token at once instead of retrying google.auth.default() for ~30 s per process.
METADATA = {
    "/": "",
    "/computeMetadata/v1/project/project-id": "emulator-project",
    "/computeMetadata/v1/universe/universe-domain": "googleapis.com",
    "/computeMetadata/v1/instance/service-accounts/default/": json.dumps(
        {"email": "default", "aliases": ["default"], "scopes": ["cloud-platform"]}
    ),
    "/computeMetadata/v1/instance/service-accounts/default/token": json.dumps(
        {"access_token": "emulator", "expires_in": 3600, "token_type": "Bearer"}
    ),
}


class Proxy(http.server.BaseHTTPRequestHandler):
    """CONNECT to the Google hosts only (the tunnel's TLS ends here), and plain GETs as the GCE
    metadata server (GCE_METADATA_HOST / GCE_METADATA_IP point here)."""

    context = None

    def do_GET(self):
        answer = METADATA.get(urllib.parse.urlsplit(self.path).path)
        if answer is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Metadata-Flavor", "Google")
        json_answer = answer.startswith("{")
        self.send_header("Content-Type", "application/json" if json_answer else "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def do_CONNECT(self):
        host = self.path.split(":")[0]
        if host not in HOSTS:
            self.send_error(403, f"{host} is not a Google storage host")
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        tls = self.context.wrap_socket(self.connection, server_side=True)
        Forwarder(tls, self.client_address, self.server)
        self.close_connection = True

    def log_message(self, *args):
        pass


def main(port: int, emulator_url: str, ca_file: str) -> None:
    cert_file, key_file = write_certificates(ca_file)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    Proxy.context = context
    parsed = urllib.parse.urlparse(emulator_url)
    Forwarder.upstream = (parsed.hostname, parsed.port)
    socketserver.ThreadingTCPServer.daemon_threads = True
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), Proxy) as server:
        print("ready", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
