"""Lakekeeper misbehaving, then recovering: the catalog side of lakeflow rides it out.

- ``lakekeeper-faults``: the stand-in answers bursts of 503 (Retry-After), 429 and connection resets
  (before and after acting) to ``lakeflow register``, ``vend`` and ``credential-process``, each run
  as its own process: all three complete, every fault was served, the table exists once.
- ``oauth-expiry``: four threads of one client call ``/credentials`` for a while with 1.5 s OAuth
  tokens, and the identity provider revokes every token mid-run: no call fails, tokens are renewed
  (not fetched per call), the revoked ones are replaced after one 401 each.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.settings import load_settings
from tests.chaos.common import Result, lakeflow, moto_server, progress, tail, timed
from tests.support.fixtures_lakekeeper import NAMESPACE, env_for, start_lakekeeper
from tests.standins.lakekeeper import LakekeeperStandin, S3Account
from tests.standins.oauth import OAuthStandin

TABLE = "sensor-readings"


def _inject(lakekeeper: LakekeeperStandin, command: str) -> int:
    """Queue the burst for one command; returns how many faults it holds.

    Bursts stay within HTTP_MAX_RETRIES; urllib3's backoff doubles with each consecutive error,
    so a longer burst mostly adds waiting."""
    f = lakekeeper.faults
    if command == "register":  # create (POST), then load (GET)
        f.unavailable(times=1, retry_after="1", method="POST")
        f.throttle(times=1, retry_after="1", method="POST")
        f.reset(times=1, method="POST")              # dropped before the server acted
        f.reset(times=1, after=True, method="POST")  # created, but the answer is lost: replayed by key
        f.unavailable(times=1, retry_after="1", method="GET")
        f.reset(times=1, method="GET")
        return 6
    if command == "vend":  # load with vended credentials
        f.unavailable(times=2, retry_after="1", method="GET")
        f.throttle(times=1, retry_after="1", method="GET")
        f.reset(times=1, method="GET")
        return 4
    f.unavailable(times=2, retry_after="1", method="GET", path_contains="/credentials")
    f.throttle(times=1, retry_after="1", method="GET", path_contains="/credentials")
    f.reset(times=1, after=True, method="GET", path_contains="/credentials")
    return 4


def lakekeeper_faults(workdir: Path) -> Result:
    result = Result("lakekeeper-faults", zeros=("failed", "duplicates", "unserved"))
    with timed(result), moto_server(workdir) as moto:
        lakekeeper = start_lakekeeper(S3Account(moto.url, moto.region))
        try:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   **env_for(lakekeeper, LAKEFLOW_HOME=str(workdir / "home"), HTTP_MAX_RETRIES="8")}
            injected = failed = 0
            for command in ("register", "vend", "credential-process"):
                injected += _inject(lakekeeper, command)
                started = time.monotonic()
                done = lakeflow(env, command, timeout=180)
                progress(result.name, f"{command}: exit {done.returncode} after {time.monotonic() - started:.1f} s")
                if done.returncode != 0:
                    failed += 1
                    result.problems.append(f"{command}: {tail(done.stderr, 3)}")
                elif command == "credential-process":
                    result.check(json.loads(done.stdout).get("SessionToken") in lakekeeper.vended_secrets,
                                 "credential-process printed no vended session token")
                leaked = [s for s in (lakekeeper.token, *lakekeeper.vended_secrets) if s in done.stderr]
                result.check(not leaked, f"{command}: a secret appeared on stderr")
            tables = [t for (ns, name), t in lakekeeper.warehouse.tables.items() if name == TABLE]
            statuses = [r.status for r in lakekeeper.requests]
            result.counts.update(injected=injected, answered_503=statuses.count(503),
                                 answered_429=statuses.count(429), commands=3, failed=failed,
                                 duplicates=len(tables) - 1, unserved=lakekeeper.faults.pending())
            result.check(not lakekeeper.violations, f"contract violations: {lakekeeper.violations[:2]}")
        finally:
            lakekeeper.stop()
    return result


def oauth_expiry(workdir: Path, *, seconds: float = 8.0, threads: int = 4, ttl: float = 1.5) -> Result:
    result = Result("oauth-expiry", zeros=("failed",))
    with timed(result), moto_server(workdir) as moto:
        oauth = OAuthStandin(ttl=ttl).start()
        lakekeeper = start_lakekeeper(S3Account(moto.url, moto.region))
        lakekeeper.accept(oauth.is_valid)
        try:
            settings = load_settings(env_for(lakekeeper, TOKEN=None, OAUTH_TOKEN_URL=oauth.token_url,
                                             OAUTH_CLIENT_ID=oauth.client_id,
                                             OAUTH_CLIENT_SECRET=oauth.client_secret,
                                             LAKEFLOW_HOME=str(workdir / "home")))
            catalog = LakekeeperCatalog.from_settings(settings)
            catalog.register(NAMESPACE, TABLE)
            calls, failures, lock = [0], [], threading.Lock()
            deadline = time.monotonic() + seconds

            def work() -> None:
                while time.monotonic() < deadline:
                    try:
                        catalog.credentials(NAMESPACE, TABLE)
                        with lock:
                            calls[0] += 1
                    except Exception as exc:  # counted: a failed call is what this scenario looks for
                        with lock:
                            failures.append(f"{type(exc).__name__}: {exc}")

            workers = [threading.Thread(target=work, name=f"oauth-expiry-{i}") for i in range(threads)]
            fetched_before = oauth.token_requests
            for w in workers:
                w.start()
            time.sleep(seconds / 2)
            oauth.revoke_all()  # the provider rotates its keys: every outstanding token is rejected
            progress(result.name, "all tokens revoked mid-run")
            for w in workers:
                w.join()
            fetches = oauth.token_requests - fetched_before
            rejected = sum(1 for r in lakekeeper.requests if r.status == 401)
            result.counts.update(calls=calls[0], failed=len(failures), token_fetches=fetches,
                                 rejected_401=rejected, token_ttl_s=ttl)
            result.check(not failures, f"first failure: {failures[0] if failures else ''}"[:300])
            result.check(fetches >= seconds / ttl / 2, f"tokens were not renewed ({fetches} fetches)")
            result.check(fetches <= calls[0] / 4, f"token fetch storm: {fetches} fetches for {calls[0]} calls")
            result.check(rejected >= 1, "the revocation was never noticed (no 401)")
        finally:
            lakekeeper.stop()
            oauth.stop()
    return result
