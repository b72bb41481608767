"""moto's S3 + STS server as the tests run it (``python tests/standins/moto_server.py -H … -p …``), with
two corrections that bring its checks closer to AWS's; keys, secrets, session tokens and IAM policies
are still enforced.

- **Signed headers.** moto checks a SigV4 signature by re-signing the request with botocore, whose
  signer never signs ``User-Agent``, ``Expect``, ``Transfer-Encoding`` or ``X-Amzn-Trace-Id``. AWS
  signs exactly the headers the client lists in ``SignedHeaders``, and the AWS SDK for Java v1
  (shaded in Flink's flink-s3-fs-hadoop) signs ``User-Agent``: moto answered 403
  SignatureDoesNotMatch to every such request. moto already keeps only the client's SignedHeaders,
  so emptying botocore's exclusion list makes it sign what the client signed.
- **DeleteObjects per key.** moto authorises a bulk delete as ``s3:DeleteObject`` on the *bucket*
  and, when that is denied, refuses every key; AWS authorises each key. Credentials scoped to a
  prefix (as Lakekeeper vends them) then could not bulk-delete their own keys (pyarrow's
  ``delete_dir``, S3A's bulk delete). A refused request is re-checked here key by key.
- **When an upload was initiated.** moto lists every open multipart upload as initiated on
  2010-11-10; AWS gives the time CreateMultipartUpload was called, which ``lakeflow maintain``'s age rule
  reads (an old-looking upload of a running job would be aborted). Each upload's creation time is kept
  and listed.
"""

import re
import sys
from datetime import datetime, timezone
from xml.sax.saxutils import escape

import botocore.auth
import moto.s3.models as s3_models
import moto.s3.responses as s3_responses
import xmltodict

botocore.auth.SIGNED_HEADERS_BLACKLIST[:] = []
_bulk_delete = s3_responses.S3Response._bucket_response_delete_keys


def _per_key_delete(self, bucket_name, authenticated=True):
    if authenticated:
        return _bulk_delete(self, bucket_name, True)
    doc = xmltodict.parse(self.body, strip_whitespace=False)
    objects = doc["Delete"].get("Object", [])
    allowed, denied = [], []
    for obj in objects if isinstance(objects, list) else [objects]:
        try:
            self._authenticate_and_authorize_s3_action(bucket_name=bucket_name, key_name=obj["Key"])
            allowed.append(obj)
        except Exception:  # noqa: BLE001 - moto's access-denied errors have no common base
            denied.append(obj["Key"])
    if not allowed:
        return _bulk_delete(self, bucket_name, False)
    doc["Delete"]["Object"] = allowed
    self.body = xmltodict.unparse(doc).encode()
    status, headers, body = _bulk_delete(self, bucket_name, True)
    errors = "".join(f"<Error><Key>{escape(k)}</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                     for k in denied)
    body = body.decode() if isinstance(body, bytes) else body
    headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    return status, headers, body.replace("</DeleteResult>", errors + "</DeleteResult>")


s3_responses.S3Response._bucket_response_delete_keys = _per_key_delete

_multipart_init = s3_models.FakeMultipart.__init__
_list_uploads = s3_responses.S3Response.list_multipart_uploads
_UPLOAD = re.compile(r"<Upload>.*?</Upload>", re.S)


def _timed_init(self, *args, **kwargs):
    _multipart_init(self, *args, **kwargs)
    self.initiated_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _listed_with_times(self):
    status, headers, body = _list_uploads(self)
    times = {u.id: getattr(u, "initiated_at", None) for u in self.backend.list_multipart_uploads(self.bucket_name).values()}

    def fix(match: re.Match) -> str:
        upload = match.group(0)
        found = re.search(r"<UploadId>([^<]+)</UploadId>", upload)
        when = times.get(found.group(1)) if found else None
        return re.sub(r"<Initiated>[^<]*</Initiated>", f"<Initiated>{when}</Initiated>", upload) if when else upload

    text = body.decode() if isinstance(body, bytes) else body
    headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    return status, headers, _UPLOAD.sub(fix, text)


s3_models.FakeMultipart.__init__ = _timed_init
s3_responses.S3Response.list_multipart_uploads = _listed_with_times

if __name__ == "__main__":
    from moto.server import main

    sys.argv[0] = "moto_server"
    main()
