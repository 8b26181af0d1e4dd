"""A page opened in headless Chromium through its DevTools protocol (CDP), for the report's browser test.

No browser-automation package: Chromium is started with ``--remote-debugging-port=0``, its browser endpoint
(printed on stderr) is reached with tornado's websocket client (tornado comes with dask's distributed), and the
page is driven by a handful of CDP commands (https://chromedevtools.github.io/devtools-protocol/):
``Target.createTarget`` / ``attachToTarget`` (a flat session), ``Runtime.enable``, ``Log.enable``,
``Page.enable``, ``Page.navigate``, the ``Page.loadEventFired`` event, then ``Runtime.evaluate`` for the images.
Console errors are the ``Runtime.consoleAPICalled`` events of type error or assert, ``Runtime.exceptionThrown``
and the ``Log.entryAdded`` entries of level error (a resource that failed to load, a blocked request).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field

#: The images of the page: alt text, whether loading finished, their natural width in pixels.
IMAGES = ("JSON.stringify(Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, "
          "width: i.naturalWidth})))")


def chromium() -> str | None:
    """The Chromium (or Chrome) executable on the PATH, or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@dataclass
class PageCheck:
    """What the browser saw: every image (alt, complete, naturalWidth) and every console error, in words."""

    images: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class _Session:
    """One CDP session over the browser's websocket: commands by id, events collected."""

    def __init__(self, ws, session_id: str | None = None):
        self.ws, self.session_id, self.next_id = ws, session_id, 0
        self.events: list[dict] = []

    async def send(self, method: str, **params) -> dict:
        self.next_id += 1
        message: dict = {"id": self.next_id, "method": method, "params": params}
        if self.session_id:
            message["sessionId"] = self.session_id
        await self.ws.write_message(json.dumps(message))
        while True:
            reply = json.loads(await self.ws.read_message())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    async def wait_for(self, method: str, timeout: float) -> None:
        async def loop():
            while not any(e.get("method") == method for e in self.events):
                self.events.append(json.loads(await self.ws.read_message()))

        await asyncio.wait_for(loop(), timeout)


async def _check(url: str, timeout: float) -> PageCheck:
    from tornado.websocket import websocket_connect

    with tempfile.TemporaryDirectory() as profile:
        proc = await asyncio.create_subprocess_exec(
            chromium() or "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            endpoint = None
            while endpoint is None:
                line = (await asyncio.wait_for(proc.stderr.readline(), timeout)).decode()  # type: ignore[union-attr]
                if not line:
                    raise RuntimeError("chromium exited before its DevTools endpoint was up")
                match = re.search(r"DevTools listening on (ws://\S+)", line)
                endpoint = match.group(1) if match else None
            ws = await websocket_connect(endpoint, max_message_size=64 << 20)
            browser = _Session(ws)
            target = (await browser.send("Target.createTarget", url="about:blank"))["targetId"]
            page = _Session(ws, (await browser.send("Target.attachToTarget", targetId=target, flatten=True))[
                "sessionId"])
            for method in ("Runtime.enable", "Log.enable", "Page.enable"):
                await page.send(method)
            await page.send("Page.navigate", url=url)
            await page.wait_for("Page.loadEventFired", timeout)
            images = json.loads((await page.send("Runtime.evaluate", expression=IMAGES, returnByValue=True))[
                "result"]["value"])
            ws.close()
        finally:
            proc.kill()
            await proc.wait()
    errors = []
    for e in page.events + browser.events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errors.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                               for a in p["args"]))
        elif e.get("method") == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
    return PageCheck(images, errors)


def check_page(url: str, timeout: float = 60.0) -> PageCheck:
    """Open ``url`` in headless Chromium; return its images and console errors once the page has loaded."""
    return asyncio.run(_check(url, timeout))
