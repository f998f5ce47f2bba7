"""Starting and stopping `mmx serve` for the Python server tests (route_memory_test.py,
fair_admission_test.py): a server on 127.0.0.1 and a free port, its port read from its log line."""
import os
import re
import subprocess
import tempfile
import time


class Serve:
    def __init__(self, mmx, model, *extra, name="mmx_serve"):
        self.log = tempfile.NamedTemporaryFile(prefix=name + "_", suffix=".log", delete=False)
        self.proc = subprocess.Popen([mmx, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "-t", "1",
                                      *extra], stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        for _ in range(600):
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(self.log.name).read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.port is None:
            print(open(self.log.name).read())

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM; returns the exit code (-9 when it had to be killed)."""
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = -9
        os.unlink(self.log.name)
        return rc
