"""A headless Chromium driven over the DevTools protocol on its own pipe
(`--remote-debugging-pipe`: commands in on fd 3, answers out on fd 4, each a JSON text
ended by a NUL byte), with the standard library alone: where test_ui.py's `--dump-dom`
only reads a page, this one also clicks in it, as a user's mouse does, and takes its
picture. No chromedriver or websocket client is needed, only the browser.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def browser_path() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """One page of a headless Chromium; ``close`` ends the browser."""

    def __init__(self, browser: str, profile: Path, size: tuple[int, int] = (1400, 900)) -> None:
        commands_in, self._to_browser = os.pipe()
        self._from_browser, answers_out = os.pipe()
        # bash puts the browser's ends on fds 3 and 4, where the browser looks for them,
        # from copies above both (an end that is fd 3 or 4 would be overwritten first)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_in, answers_out)]
        onto = f"3<&{high[0]} 4>&{high[1]} {high[0]}<&- {high[1]}>&-"
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$@" {onto}', "bash", browser, *FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", "about:blank"],
            pass_fds=high, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (commands_in, answers_out, *high):
            os.close(fd)
        self._answers: dict[int, queue.Queue] = {}
        self._next = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)

    def _read(self) -> None:
        pending = b""
        while chunk := os.read(self._from_browser, 1 << 16):
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for message in messages:
                answer = json.loads(message)
                if "id" in answer and answer["id"] in self._answers:
                    self._answers[answer["id"]].put(answer)

    def send(self, method: str, params: dict | None = None, session: bool = False,
             timeout: float = 60) -> dict[str, Any]:
        """Call a DevTools method (on the page with ``session``) and return its result."""
        with self._lock:
            self._next += 1
            number = self._next
            self._answers[number] = queue.Queue()
        message = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        answer = self._answers[number].get(timeout=timeout)
        del self._answers[number]
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def go(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=True)

    def run(self, script: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": script, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{script[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        return self.run("document.body ? document.body.innerText : ''") or ""

    def wait_for(self, script: str, timeout: float = 60, what: str = "") -> Any:
        """Poll a JavaScript expression until it is truthy (one that throws is not, e.g.
        on a page still loading); its value."""
        deadline = time.monotonic() + timeout
        while not (value := self._value_or_none(script)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what or script[:80]} within {timeout} s; page text: {self.text()[:1500]}")
            time.sleep(0.1)
        return value

    def _value_or_none(self, script: str) -> Any:
        try:
            return self.run(script)
        except RuntimeError:
            return None

    def click(self, script: str) -> None:
        """Press and release the mouse at the middle of the element ``script`` returns."""
        box = self.run(f"(() => {{ const e = {script}; e.scrollIntoView({{block: 'center'}}); "
                       "const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1}, session=True)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, queue.Empty, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
