"""Deployment settings (issue 4, part 4): upload limits, XSRF, error details, and the optional login.

The dashboard is safe to expose only with these settings; each is checked where it is set
(``.streamlit/config.toml``, the uploaders, ``requirements.txt``) and, where Streamlit allows, where
it takes effect. The login gate (``app.login_gate``) is tested with AppTest: with an ``[auth]``
section configured and nobody logged in, only the login page is drawn.
"""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import streamlit
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".streamlit" / "config.toml"
UI = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
MAX_UPLOAD_MB = 50
#: Options that weaken the server if changed from code (they must only come from config.toml).
SECURITY_OPTIONS = {"server.enableXsrfProtection", "server.enableCORS", "server.maxUploadSize", "client.showErrorDetails",
                    "server.enableStaticServing", "global.developmentMode", "client.toolbarMode"}
AUTH = {"redirect_uri": "https://dp.example.org/oauth2callback", "cookie_secret": "k" * 48, "client_id": "dpsynth",
        "client_secret": "s3cret", "server_metadata_url": "https://idp.example.org/.well-known/openid-configuration"}


def version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def test_server_settings() -> None:
    cfg = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    server, client = cfg.get("server", {}), cfg.get("client", {})
    assert server["maxUploadSize"] <= MAX_UPLOAD_MB  # Streamlit's default is 200 MB
    assert server["enableXsrfProtection"] is True
    assert server.get("enableCORS", True) is True
    assert server.get("enableStaticServing", False) is False
    assert client["showErrorDetails"] == "none"  # the default, "full", sends tracebacks to the browser
    assert client.get("toolbarMode") in {"viewer", "minimal"}
    assert cfg.get("global", {}).get("developmentMode", False) is False
    assert cfg.get("logger", {}).get("level", "info") not in {"debug"}  # debug logs carry message contents
    assert cfg.get("browser", {}).get("gatherUsageStats") is False


def test_streamlit_has_the_chunked_upload_size_fix() -> None:
    """Before 1.67.0 chunked uploads bypassed maxUploadSize (streamlit PR #16207)."""
    pins = [ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.strip().startswith("streamlit")]
    assert pins and all(">=" in p and version(p.split(">=")[1]) >= (1, 67, 0) for p in pins), pins
    assert version(streamlit.__version__) >= (1, 67, 0)


def _calls(path: Path, name: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name]


def test_every_uploader_limits_type_and_size() -> None:
    uploaders = [(p, c) for p in UI for c in _calls(p, "file_uploader")]
    assert uploaders, "no st.file_uploader found: update this test"
    for path, call in uploaders:
        kw = {k.arg: k.value for k in call.keywords}
        where = f"{path.name}:{call.lineno}"
        assert "type" in kw, f"{where}: file_uploader without type= accepts any file"
        assert "max_upload_size" in kw, f"{where}: file_uploader without its own max_upload_size"
        limit = kw["max_upload_size"]
        assert isinstance(limit, ast.Constant) and 0 < limit.value <= MAX_UPLOAD_MB, where
        if "accept_multiple_files" in kw:
            assert isinstance(kw["accept_multiple_files"], ast.Constant) and kw["accept_multiple_files"].value is False


def test_no_code_overrides_a_security_option() -> None:
    for path in UI:
        for call in _calls(path, "set_option"):
            key = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
            assert key is not None and key not in SECURITY_OPTIONS, f"{path.name}:{call.lineno} sets {key!r}"


def test_secrets_are_never_committed() -> None:
    ignored = subprocess.run(["git", "check-ignore", "-q", ".streamlit/secrets.toml"], cwd=ROOT, check=False)
    tracked = subprocess.run(["git", "ls-files", ".streamlit"], cwd=ROOT, capture_output=True, text=True, check=False)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    assert "secrets.toml" not in tracked.stdout
    assert ignored.returncode == 0, ".streamlit/secrets.toml must be in .gitignore (it holds the OIDC client secret)"


def test_error_details_do_not_reach_the_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the repository's config, an exception in the app shows neither its message nor a traceback."""
    from streamlit import config

    monkeypatch.chdir(ROOT)
    config.get_config_options(force_reparse=True)
    try:
        assert config.get_option("client.showErrorDetails") == "none"
        at = AppTest.from_string("raise ValueError('CANARY_error_7c1d in row 3')").run()
        assert at.exception
        shown = " ".join(f"{e.message} {e.stack_trace}" for e in at.exception)
        assert "CANARY_error_7c1d" not in shown and "ValueError" not in shown and "Traceback" not in shown
    finally:
        config.get_config_options(force_reparse=True)


# ---------------------------------------------------------------- the optional login


def app(auth: dict[str, str] | None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if auth is not None:
        at.secrets["auth"] = auth
    return at.run()


def test_without_auth_configured_the_dashboard_opens() -> None:
    at = app(None)
    assert not at.exception
    assert not [b for b in at.button if b.key == "login_button"]
    assert any(u.key == "data_upload" for u in at.get("file_uploader"))


def test_with_auth_configured_a_visitor_sees_only_the_login_page() -> None:
    at = app(AUTH)
    assert not at.exception
    assert [t.value for t in at.title] == ["dpsynth — sign in"]
    assert [b.key for b in at.button] == ["login_button"]
    assert not at.get("file_uploader")
    assert not at.sidebar.get("markdown") and not at.sidebar.get("caption")  # no session status either
    assert not at.metric and not at.dataframe
    text = " ".join(str(m.value) for m in at.markdown)
    assert "Your session" not in text and "ε" not in text
    assert "dpsynth_state" not in at.session_state  # no application state is even created


def test_with_auth_configured_a_logged_in_user_sees_the_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit.user_info as user_info

    monkeypatch.setattr(user_info, "_get_user_info", lambda: {"is_logged_in": True, "email": "curator@example.org"})
    at = app(AUTH)
    assert not at.exception
    assert not [b for b in at.button if b.key == "login_button"]
    assert any(u.key == "data_upload" for u in at.get("file_uploader"))
