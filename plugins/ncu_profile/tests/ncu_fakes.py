"""Test helper: a stand-in for `kcoral.client.KCoralClient` that answers from fixtures."""

import hashlib


class FakeClient:
    def __init__(self, tools_result, refuse=None):
        self.blobs, self.docs, self.tools_result, self.refuse = {}, [], tools_result, refuse

    def put_blob(self, data):
        dg = hashlib.sha256(data).hexdigest()
        self.blobs[dg] = data
        return dg

    def submit(self, doc, timeout=None):
        doc = doc.to_doc() if hasattr(doc, "to_doc") else doc  # a kcoral.job.Job or its JSON
        self.docs.append(doc)
        if self.refuse is not None:
            from kcoral.client import KCoralError
            raise KCoralError("INVALID_ARGUMENT", self.refuse)
        yield {"state": "done", "job_id": "j1", "message": "",
               "result": {"status": "ok", "tools": self.tools_result}}

    def download(self, dg):
        return self.blobs[dg]
