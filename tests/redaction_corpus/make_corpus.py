"""Generate the redaction corpus: ``positives.jsonl`` and ``negatives.jsonl`` beside this file.

Every secret here is FAKE: built from a fixed-seed random generator, most of them carrying the word
``FAKE``. Each record is one case::

    {"id": "...", "label": "positive" | "negative", "rule": "<rule id>" | null,
     "form": "patch" | "text", "text": "...", "note": "why this case is here"}

``form`` says how the test scans it: a ``patch`` goes through ``redact_patch`` (added lines only),
``text`` through ``scan`` (every line).

So that the committed files never contain a byte sequence that push-protection scanners match,
the second character of each vendor prefix is written as a JSON ``\\u`` escape (``g\\u0068p_``);
``json.loads`` restores it. Run ``python tests/redaction_corpus/make_corpus.py`` to rewrite the
files; ``tests/unit/test_redact.py`` checks that the committed files equal this script's output.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20240611

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
UPPER32 = string.ascii_uppercase + "234567"
HEXD = "0123456789abcdef"

# Prefixes written with an escaped second character in the committed files.
DEFANG = (
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxr-",
    "hooks.slack.com",
    "sk_live_",
    "rk_live_",
    "sk_test_",
    "pk_live_",
    "pk_test_",
    "AIza",
    "sk-ant-",
    "sk-proj-",
    "sk-",
    "npm_",
    "pypi-",
    "eyJ",
    "PRIVATE KEY",
    "EXAMPLE",
)


class Corpus:
    def __init__(self) -> None:
        self.rnd = random.Random(SEED)
        self.records: list[dict[str, object]] = []

    # random material -------------------------------------------------------------------------
    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.rnd.choice(alphabet) for _ in range(n))

    def fake(self, alphabet: str, n: int) -> str:
        """``n`` random characters with FAKE at a random position."""
        body = self.s(alphabet, n - 4)
        cut = self.rnd.randrange(len(body) + 1)
        return body[:cut] + "FAKE" + body[cut:]

    def b64bytes(self, n: int, *, url: bool = False) -> str:
        raw = self.rnd.randbytes(n)
        enc = base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)
        return enc.decode().rstrip("=") if url else enc.decode()

    def hexs(self, n: int) -> str:
        return self.s(HEXD, n)

    # records ---------------------------------------------------------------------------------
    def add(self, label: str, rule: str | None, form: str, text: str, note: str) -> None:
        n = sum(1 for r in self.records if r["label"] == label) + 1
        rid = f"{label[:3]}-{n:03d}"
        self.records.append(
            {"id": rid, "label": label, "rule": rule, "form": form, "text": text, "note": note}
        )

    def pos(self, rule: str, path: str, line: str, note: str) -> None:
        self.add("positive", rule, "patch", patch(path, [line]), note)

    def neg(self, path: str, line: str, note: str) -> None:
        self.add("negative", None, "patch", patch(path, [line]), note)


def patch(
    path: str,
    added: list[str],
    *,
    before: tuple[str, ...] = ("# settings",),
    after: tuple[str, ...] = ("",),
    removed: tuple[str, ...] = (),
) -> str:
    """A valid one-hunk unified diff that adds ``added`` to ``path``."""
    old = len(before) + len(removed) + len(after)
    new = len(before) + len(added) + len(after)
    body = (
        [f" {x}" for x in before]
        + [f"-{x}" for x in removed]
        + [f"+{x}" for x in added]
        + [f" {x}" for x in after]
    )
    head = [
        f"diff --git a/{path} b/{path}",
        "index 4b825dc..8e2f1a7 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
        f"@@ -3,{old} +3,{new} @@",
    ]
    return "\n".join(head + body) + "\n"


# ------------------------------------------------------------------------------------------------
# positives


def positives(c: Corpus) -> None:
    for i in range(10):
        key = ("AKIA", "ASIA")[i % 2] + c.fake(UPPER32, 16)
        line, path = [
            (f"aws_access_key_id = {key}", "deploy/credentials"),
            (f"AWS_ACCESS_KEY_ID={key}", ".env"),
            (f'    "accessKeyId": "{key}",', "config/aws.json"),
            (f's3 = boto3.client("s3", aws_access_key_id="{key}")', "scripts/upload.py"),
            (f"export AWS_ACCESS_KEY_ID={key}", "deploy.sh"),
            (f"  access_key: {key}", "config/storage.yml"),
            (f"const creds = {{ id: '{key}' }};", "src/aws.ts"),
            (f"key id {key} (rotated weekly)", "NOTES.md"),
            (f'	AccessKeyID: "{key}",', "internal/s3/client.go"),
            (f"<accessKey>{key}</accessKey>", "conf/backup.xml"),
        ][i]
        c.pos("aws-access-key-id", path, line, "an AWS access key id in a config or code file")

    for i in range(9):
        sec = c.fake(ALNUM + "/+", 40)
        line, path = [
            (f"aws_secret_access_key = {sec}", "deploy/credentials"),
            (f'AWS_SECRET_ACCESS_KEY="{sec}"', ".env.production"),
            (f"  secretAccessKey: '{sec}'", "serverless.yml"),
            (f'    "aws_secret_access_key": "{sec}"', "config/aws.json"),
            (f"export AWS_SECRET_ACCESS_KEY={sec}", "ci/publish.sh"),
            (f'session = Session(aws_secret_access_key="{sec}")', "app/storage.py"),
            (f"  secret_access_key: {sec}", "terraform/backend.yml"),
            (f"aws_secret_key => '{sec}',", "lib/config.rb"),
            (f'AwsSecretKey := "{sec}"', "pkg/cloud/keys.go"),
        ][i]
        c.pos("aws-secret-access-key", path, line, "an AWS secret key assigned to its usual name")

    for i in range(12):
        if i < 10:
            tok = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")[i % 5] + c.fake(ALNUM, 36)
        else:
            tok = "github_pat_" + c.fake(ALNUM, 22) + "_" + c.s(ALNUM, 59)
        line, path = [
            (f'GITHUB_TOKEN="{tok}"', ".env"),
            (f'gh = Github("{tok}")', "tools/release.py"),
            (f"git clone https://x-access-token:{tok}@github.com/org/repo", "ci/clone.sh"),
            (f"  token: {tok}", ".github/config.yml"),
            (f"//registry.npmjs.org/:_authToken={tok}", ".npmrc"),
            (f"const octokit = new Octokit({{ auth: '{tok}' }});", "scripts/sync.js"),
            (f"echo {tok} | gh auth login --with-token", "setup.sh"),
            (f"    'github': '{tok}',", "conf/tokens.py"),
            (f"token = {tok}", "setup.cfg"),
            (f"The token {tok} expires in 30 days.", "docs/ci.md"),
            (f'client := github.NewTokenClient(ctx, "{tok}")', "cmd/bot/main.go"),
            (f"GH_PAT={tok}", ".env.local"),
        ][i]
        c.pos("github-token", path, line, "a GitHub token (classic or fine-grained)")

    for i in range(8):
        tok = "glpat-" + c.fake(B64URL, 20)
        line, path = [
            (f"GITLAB_TOKEN={tok}", ".env"),
            (f'gl = gitlab.Gitlab(url, private_token="{tok}")', "tools/mirror.py"),
            (f"  private_token: {tok}", "config/gitlab.yml"),
            (f'curl --header "PRIVATE-TOKEN: {tok}" "$API/projects"', "scripts/api.sh"),
            (f"glab auth login --token {tok}", "README.md"),
            (f"const gitlabToken = `{tok}`;", "src/gitlab.ts"),
            (f"{tok}", "secrets/gitlab.txt"),
            (f'    "gitlab": "{tok}"', "tokens.json"),
        ][i]
        c.pos("gitlab-token", path, line, "a GitLab personal access token")

    for i in range(9):
        kind = "abpr"[i % 4]
        tok = f"xox{kind}-{c.s(string.digits, 12)}-{c.s(string.digits, 13)}-{c.fake(ALNUM, 24)}"
        line, path = [
            (f"SLACK_BOT_TOKEN={tok}", ".env"),
            (f'client = WebClient(token="{tok}")', "bot/notify.py"),
            (f"  bot_token: {tok}", "config/slack.yml"),
            (f"const web = new WebClient('{tok}');", "src/slack.js"),
            (f"curl -d token={tok} https://slack.com/api/chat.postMessage", "ops/ping.sh"),
            (f"slack.token = {tok}", "app.properties"),
            (f"use {tok} for the staging workspace", "NOTES.txt"),
            (f'    "slack": "{tok}",', "conf/integrations.json"),
            (f'SlackToken = "{tok}"', "internal/notify/slack.go"),
        ][i]
        c.pos("slack-token", path, line, "a Slack bot, user, app or refresh token")

    for i in range(8):
        hook = (
            f"https://hooks.slack.com/services/T{c.s(UPPER32, 8)}/B{c.s(UPPER32, 10)}/"
            f"{c.fake(ALNUM, 24)}"
        )
        line, path = [
            (f"SLACK_WEBHOOK_URL={hook}", ".env"),
            (f'requests.post("{hook}", json=payload)', "ops/alert.py"),
            (f"  webhook: {hook}", "config/alerts.yml"),
            (f"curl -X POST -d @msg.json {hook}", "scripts/notify.sh"),
            (f"const url = '{hook}';", "src/notify.ts"),
            (f"url = {hook}", "deploy/alerts.ini"),
            (f"post failures to {hook}", "docs/oncall.md"),
            (f'    "webhook": "{hook}"', "ci/notify.json"),
        ][i]
        c.pos("slack-webhook", path, line, "a Slack incoming webhook URL")

    for i in range(9):
        prefix = ("sk_live_", "rk_live_", "sk_test_")[i % 3]
        tok = prefix + c.fake(ALNUM, 24 + i * 4)
        line, path = [
            (f"STRIPE_SECRET_KEY={tok}", ".env"),
            (f'stripe.api_key = "{tok}"', "billing/client.py"),
            (f"const stripe = require('stripe')('{tok}');", "server/billing.js"),
            (f"  secret_key: {tok}", "config/stripe.yml"),
            (f"curl https://api.stripe.com/v1/charges -u {tok}:", "scripts/refund.sh"),
            (f'Stripe.apiKey = "{tok}";', "src/main/java/Billing.java"),
            (f"Stripe.api_key = '{tok}'", "config/initializers/stripe.rb"),
            (f"restricted key for reports: {tok}", "docs/billing.md"),
            (f'    "stripe": "{tok}",', "keys.json"),
        ][i]
        c.pos("stripe-key", path, line, "a Stripe secret or restricted key (live or test)")

    for i in range(8):
        key = "AIza" + c.fake(B64URL, 35)
        line, path = [
            (f"GOOGLE_API_KEY={key}", ".env"),
            (f'genai.configure(api_key="{key}")', "ai/gemini.py"),
            (f'<script src="https://maps.googleapis.com/maps/api/js?key={key}">', "web/map.html"),
            (f"  apiKey: '{key}',", "src/firebase.ts"),
            (f"maps.key={key}", "app.properties"),
            (f'    "api_key": "{key}"', "android/google-services.json"),
            (f"YOUTUBE = build('youtube', 'v3', developerKey='{key}')", "tools/yt.py"),
            (f"key {key} is restricted to the staging referrer", "NOTES.md"),
        ][i]
        c.pos("google-api-key", path, line, "a Google API key")

    for i in range(9):
        key = f"sk-ant-{('api03', 'admin01')[i % 2]}-{c.fake(B64URL, 93)}AA"
        line, path = [
            (f"ANTHROPIC_API_KEY={key}", ".env"),
            (f'client = anthropic.Anthropic(api_key="{key}")', "ai/claude.py"),
            (f"export ANTHROPIC_API_KEY='{key}'", "scripts/dev.sh"),
            (f"const anthropic = new Anthropic({{ apiKey: '{key}' }});", "src/llm.ts"),
            (f"  anthropic: {key}", "config/llm.yml"),
            (f'curl -H "x-api-key: {key}" https://api.anthropic.com/v1/messages', "ops/t.sh"),
            (f'    "key": "{key}"', "providers.json"),
            (f"use {key} for the eval run", "docs/evals.md"),
            (f'llm.Key = "{key}"', "internal/llm/client.go"),
        ][i]
        c.pos("anthropic-key", path, line, "an Anthropic API or admin key")

    for i in range(10):
        if i % 2:
            key = "sk-proj-" + c.fake(B64URL, 120)
        else:
            key = "sk-" + c.fake(ALNUM, 20) + "T3BlbkFJ" + c.s(ALNUM, 20)
        line, path = [
            (f"OPENAI_API_KEY={key}", ".env"),
            (f'client = OpenAI(api_key="{key}")', "ai/openai_client.py"),
            (f"export OPENAI_API_KEY={key}", ".envrc"),
            (f"const openai = new OpenAI({{ apiKey: '{key}' }});", "src/ai.ts"),
            (f"  openai_key: {key}", "config/llm.yml"),
            (f'curl -H "X-Key: {key}" https://api.openai.com/v1/models', "scripts/ping.sh"),
            (f"openai.key={key}", "app.properties"),
            (f"temporary key {key}", "NOTES.md"),
            (f'    "openai": "{key}",', "providers.json"),
            (f"llm = ChatOpenAI(openai_api_key='{key}')", "agents/chain.py"),
        ][i]
        c.pos("openai-key", path, line, "an OpenAI key (legacy or project)")

    for i in range(8):
        tok = "npm_" + c.fake(ALNUM, 36)
        line, path = [
            (f"//registry.npmjs.org/:_authToken={tok}", ".npmrc"),
            (f"NPM_TOKEN={tok}", ".env"),
            (f"  npmAuthToken: {tok}", ".yarnrc.yml"),
            (f"echo '//registry.npmjs.org/:_authToken={tok}' > ~/.npmrc", "ci/publish.sh"),
            (f'    "token": "{tok}"', "release.json"),
            (f"const NPM = '{tok}';", "scripts/publish.mjs"),
            (f"publish with {tok}", "RELEASING.md"),
            (f'env["NPM_TOKEN"] = "{tok}"', "tools/release.py"),
        ][i]
        c.pos("npm-token", path, line, "an npm access token")

    for i in range(8):
        tok = "pypi-AgEIcHlwaS5vcmc" + c.fake(B64URL, 70)
        line, path = [
            (f"password = {tok}", ".pypirc"),
            (f"TWINE_PASSWORD={tok}", ".env"),
            (f"uv publish --token {tok}", "scripts/release.sh"),
            (f"  pypi_token: {tok}", ".github/release.yml"),
            (f'token = "{tok}"', "tools/publish.py"),
            (f"poetry config pypi-token.pypi {tok}", "Makefile"),
            (f"upload token: {tok}", "RELEASING.md"),
            (f'    "pypi": "{tok}"', "release.json"),
        ][i]
        c.pos("pypi-token", path, line, "a PyPI API token")

    for i in range(9):
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        claims = {
            "sub": f"fake-user-{c.s(string.digits, 6)}",
            "name": "FAKE",
            "iat": 1700000000 + i,
        }
        payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        jwt = f"{header}.{payload}.{c.b64bytes(32, url=True)}"
        line, path = [
            (f'SESSION = "{jwt}"', "tests/conftest.py"),
            (f"const session = '{jwt}';", "src/api/session.ts"),
            (f"  id_token: {jwt}", "config/dev.yml"),
            (f"curl -b 'sid={jwt}' https://app.internal/me", "scripts/me.sh"),
            (f'    "jwt": "{jwt}"', "fixtures/session.json"),
            (f"{jwt}", "tmp/token.txt"),
            (f"Cookie: session={jwt}", "docs/debug.md"),
            (f'let cookie = "{jwt}".to_string();', "src/auth.rs"),
            (f"JWT={jwt}", ".env"),
        ][i]
        c.pos("jwt", path, line, "a signed JSON web token")

    for i in range(9):
        label = ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY")[i % 4]
        body = ["MIIEFAKE" + c.b64bytes(42)] + [c.b64bytes(48) for _ in range(3 + i % 4)]
        body.append(c.b64bytes(20))
        if i < 6:
            lines = [f"-----BEGIN {label}-----", *body, f"-----END {label}-----"]
            path = ("deploy/id_rsa", "certs/server.key", "keys/ci_ed25519", "tls/tls.key")[i % 4]
            text = patch(path, lines, before=(), after=())
            c.add("positive", "private-key", "patch", text, "a PEM private key block, one per line")
        else:
            inline = "\\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])
            line = f'  "private_key": "{inline}\\n",'
            c.pos("private-key", "secrets/service-account.json", line, "a key in a JSON string")
    c.add(
        "positive",
        "private-key",
        "text",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEFAKE" + c.b64bytes(40) + "\n-----END RSA",
        "a private key in plain text, cut off before its END line",
    )

    for i in range(10):
        pw = c.fake(ALNUM + "!#%^*", 14)
        line, path = [
            (f"DATABASE_URL=postgres://app:{pw}@db.internal:5432/app", ".env"),
            (f'engine = create_engine("mysql://root:{pw}@10.0.0.5/shop")', "app/db.py"),
            (f"  url: mongodb+srv://svc:{pw}@cluster0.abcd.mongodb.net/prod", "config/db.yml"),
            (f"REDIS_URL=redis://:{pw}@cache.internal:6379/0", ".env"),
            (f"const amqp = 'amqp://worker:{pw}@mq.internal:5672/';", "src/queue.ts"),
            (f"pip install -i https://deploy:{pw}@pypi.internal/simple pkg", "Dockerfile"),
            (f"proxy = http://ops:{pw}@proxy.corp:3128", "pip.conf"),
            (f"git remote add origin https://bot:{pw}@git.internal/app.git", "setup.sh"),
            (f'dsn := "postgresql://reporter:{pw}@replica:5432/db"', "cmd/report/main.go"),
            (f"connect with ftp://backup:{pw}@files.internal/", "docs/backup.md"),
        ][i]
        c.pos("url-credentials", path, line, "a password in the userinfo of a URL")

    for i in range(9):
        tok = c.fake(B64URL, 32 + i)
        basic = base64.b64encode(f"svc-{i}:{c.fake(ALNUM, 16)}".encode()).decode()
        line, path = [
            (f'curl -H "Authorization: Bearer {tok}" https://api.internal/v1', "scripts/get.sh"),
            (f'headers = {{"Authorization": "Bearer {tok}"}}', "client/http.py"),
            (f"Authorization: Basic {basic}", "docs/api.http"),
            (f"  authorization: 'token {tok}'", "config/hooks.yml"),
            (f'req.Header.Set("Authorization", "Bearer {tok}")', "pkg/api/client.go"),
            (f"fetch(url, {{ headers: {{ Authorization: 'Bearer {tok}' }} }})", "src/api.js"),
            (f"Proxy-Authorization: Basic {basic}", "tests/http/proxy.txt"),
            (f'    "Authorization": "Bearer {tok}"', "postman/env.json"),
            (f"wget --header='Authorization: Bearer {tok}' $URL", "Makefile"),
        ][i]
        c.pos("auth-header", path, line, "a credential in an Authorization header")

    names = [
        ("DB_PASSWORD={v}", ".env"),
        ('SECRET_KEY = "{v}"', "app/settings.py"),
        ("  password: {v}", "config/database.yml"),
        ('    "client_secret": "{v}",', "config/oauth.json"),
        ('api_key := "{v}"', "internal/api/client.go"),
        ("const apiKey = '{v}';", "src/api.ts"),
        ("spring.datasource.password={v}", "src/main/resources/application.properties"),
        ("password = {v}", "config.ini"),
        ("export SERVICE_TOKEN={v}", "deploy.sh"),
        ("ENV API_SECRET={v}", "Dockerfile"),
        ('private static final String PASSWORD = "{v}";', "src/main/java/Db.java"),
        ("  passphrase: '{v}'", "config/gpg.yml"),
        ("mysql -u root --password={v} shop", "scripts/dump.sh"),
        ("webhook_secret = '{v}'", "config/hooks.toml"),
        ('auth_token = "{v}"', "lib/client.rb"),
        ("$password = '{v}';", "config/db.php"),
        ("REFRESH_TOKEN={v}", ".env.local"),
        ('let encryption_key = "{v}";', "src/crypto.rs"),
        ("  signingKey: {v}", "config/jwt.yml"),
        ('db_password: str = "{v}"', "app/config.py"),
        ("$ENV:ADMIN_PASSWORD = '{v}'", "scripts/setup.ps1"),
        ("credentials = {v}", "deploy/app.cfg"),
        ('config.access_token = "{v}"', "config/initializers/api.rb"),
        ('<add key="ApiKey" value="{v}" />', "Web.config"),
    ]
    for i, (tmpl, path) in enumerate(names):
        if i % 3 == 0:
            v = c.fake(ALNUM + "!@#%&*", 18)
        elif i % 3 == 1:
            v = c.s(string.ascii_lowercase + string.digits, 32)
        else:
            v = c.s(string.ascii_letters, 6) + c.s(string.digits, 2) + c.s("!@#$%", 1)
        c.pos("secret-assignment", path, tmpl.format(v=v), "a literal value for a credential name")

    contexts = [
        ('client = VendorClient("{v}")', "app/vendor.py"),
        ("const SIGNATURE = '{v}';", "src/sign.ts"),
        ('curl -H "X-Vendor-Auth: {v}" https://api.vendor.test/items', "scripts/items.sh"),
        ("  - {v}", "config/allowed.yml"),
        ('    "hmac": "{v}",', "config/hooks.json"),
        ("vendor.connect('{v}')", "lib/vendor.rb"),
        ('conn := vendor.Dial("{v}")', "cmd/sync/main.go"),
        ("{v}", "keys/partner.txt"),
        ("HMAC={v}", "deploy/partner.env"),
        ('new Client("{v}", region)', "src/main/java/Partner.java"),
        ("seed: {v}", "config/crypto.yml"),
        ("the partner gave us {v} for staging", "docs/partner.md"),
    ]
    for i in range(24):
        tmpl, path = contexts[i % len(contexts)]
        size = (20, 24, 28, 32, 40, 44, 64, 88)[i % 8]
        v = c.b64bytes(size * 3 // 4, url=i % 3 == 1) if i % 2 else c.fake(B64, size)
        c.pos("high-entropy", path, tmpl.format(v=v), "a random token with no telling name")

    text_cases = [
        ("github-token", "here is my token: ghp_" + c.fake(ALNUM, 36)),
        ("aws-access-key-id", "AKIA" + c.fake(UPPER32, 16) + " / us-east-1"),
        ("secret-assignment", "DB_PASSWORD=" + c.fake(ALNUM + "#!", 16)),
        ("url-credentials", "postgres://admin:" + c.fake(ALNUM, 16) + "@10.1.2.3/db"),
        ("high-entropy", "token for the partner api " + c.b64bytes(30)),
    ]
    for rule, text in text_cases:
        c.add("positive", rule, "text", text + "\n", "plain text (a prompt or a log line)")

    planted = patch(
        "src/payments/client.py",
        [
            "import os",
            "",
            "class PaymentsClient:",
            "    def __init__(self) -> None:",
            '        self.base_url = "https://api.payments.test/v2"',
            '        self.key = "sk_live_' + c.fake(ALNUM, 32) + '"',
            "        self.timeout = 30",
        ],
        before=("from __future__ import annotations",),
        after=("", "__all__ = ['PaymentsClient']"),
    )
    c.add("positive", "stripe-key", "patch", planted, "a key planted in a longer realistic patch")


# ------------------------------------------------------------------------------------------------
# negatives


def negatives(c: Corpus) -> None:
    for i in range(14):
        integ = "sha512-" + c.b64bytes(64)
        name = ("left-pad", "lodash", "react", "chalk", "debug", "ms", "semver")[i % 7]
        line, path = [
            (f'      "integrity": "{integ}",', "package-lock.json"),
            (f"  integrity {integ}", "yarn.lock"),
            (f"    resolution: {{integrity: {integ}}}", "pnpm-lock.yaml"),
            (f'<script src="/{name}.js" integrity="{integ}"></script>', "web/index.html"),
        ][i % 4]
        c.neg(path, line, "a subresource-integrity digest (base64 sha512)")
    for i in range(8):
        c.neg(
            "go.sum",
            f"github.com/pkg/mod{i} v1.{i}.0 h1:{c.b64bytes(32)}",
            "a Go module checksum (base64 after h1:)",
        )
    for i in range(8):
        line, path = [
            (f'    {{file = "pkg-{i}.tar.gz", hash = "sha256:{c.hexs(64)}"}},', "poetry.lock"),
            (f'checksum = "{c.hexs(64)}"', "Cargo.lock"),
            (f'  "hash": "{c.hexs(64)}",', "Pipfile.lock"),
            (f'    sha256 = "{c.hexs(64)}";', "flake.lock"),
        ][i % 4]
        c.neg(path, line, "a sha256 digest in a lockfile")
    for i in range(12):
        oid = c.hexs(40)
        line, path = [
            (f"Fixes the regression introduced in {oid}.", "CHANGELOG.md"),
            (f"    rev: {oid}", ".pre-commit-config.yaml"),
            (f'COMMIT = "{oid}"', "tools/pin.py"),
            (f"FROM python:3.11-slim@sha256:{c.hexs(64)}", "Dockerfile"),
            (f"  ref: {oid}", ".github/workflows/ci.yml"),
            (f"{c.hexs(64)}  dist/app-1.2.{i}.tar.gz", "SHA256SUMS"),
        ][i % 6]
        c.neg(path, line, "a git object id or a digest")
    for i in range(10):
        u = f"{c.hexs(8)}-{c.hexs(4)}-4{c.hexs(3)}-a{c.hexs(3)}-{c.hexs(12)}"
        line, path = [
            (f'REQUEST_ID = "{u}"', "tests/test_api.py"),
            (f'  "tenantId": "{u}",', "config/azure.json"),
            (f"    client_id: {u}", "config/oauth.yml"),
            (f"const ORG = '{u}';", "src/org.ts"),
            (f'token_id = "{u}"', "tests/fixtures.py"),
        ][i % 5]
        c.neg(path, line, "a UUID")

    placeholders = [
        ('API_KEY = "<your-api-key-here>"', "README.md"),
        ("GITHUB_TOKEN=<your-token-here>", ".env.example"),
        ("OPENAI_API_KEY=${OPENAI_API_KEY}", "docker-compose.yml"),
        ("  token: ${{ secrets.GITHUB_TOKEN }}", ".github/workflows/release.yml"),
        ("      GH_TOKEN: ${{ github.token }}", ".github/workflows/ci.yml"),
        ('api_key = os.environ["API_KEY"]', "app/config.py"),
        ("const secret = process.env.STRIPE_SECRET_KEY;", "server/billing.js"),
        ('password = ""', "tests/test_login.py"),
        ("password = None", "app/models.py"),
        ("  password: changeme", "config/dev.yml"),
        ('api_key = "xxxxxxxxxxxxxxxxxxxxxxxx"', "docs/quickstart.md"),
        ('  secret: "********"', "config/example.yml"),
        ("TOKEN=...", "docs/setup.md"),
        ('password = "password"', "tests/fixtures.py"),
        ("DB_PASSWORD=", ".env.example"),
        ("  password: {{ .Values.db.password }}", "chart/templates/secret.yaml"),
        ("password = var.db_password", "terraform/main.tf"),
        ("password = random_password.db.result", "terraform/rds.tf"),
        ('token = get_token(scope="repo")', "tools/release.py"),
        ("secret = self.secret", "app/auth.py"),
        ("let token = req.headers.authorization;", "src/middleware.ts"),
        ("api_key: YOUR_API_KEY", "config/example.yml"),
        ("export AWS_SECRET_ACCESS_KEY=$AWS_SECRET", "ci/env.sh"),
        ('password = "test-password-123"', "tests/test_auth.py"),
        ('token = "dummy-token-for-tests"', "tests/conftest.py"),
        ("  client_secret: REPLACE_ME", "config/oauth.example.yml"),
        ('secret_key = "insert-secret-here"', "docs/deploy.md"),
        ("password: %(db_password)s", "alembic.ini"),
        ('"password": "{password}",', "templates/config.json.tmpl"),
        ("token = token_from_env()", "scripts/ci.py"),
        ("apiKey: string;", "src/types.ts"),
        ("password: str", "app/schemas.py"),
        ("def login(username: str, password: str) -> Session:", "app/auth.py"),
        ('assert response.json()["token"] == token', "tests/test_api.py"),
        ("if password == confirm_password:", "app/forms.py"),
        ("secret = base64.b64decode(secret_b64)", "app/crypto.py"),
        ("    password=settings.DB_PASSWORD,", "app/db.py"),
        ('TOKEN_ENV = "GITHUB_TOKEN"', "tools/env.py"),
        ('api_key = settings.get("vendor.api_key")', "app/vendor.py"),
        ("  password: !vault |", "group_vars/all.yml"),
        ("password: ''", "config/test.yml"),
        ('secret = "mock-secret"', "tests/test_hmac.py"),
        ("  token: sample-token", "docs/config.yml"),
        ("password => undef,", "manifests/db.pp"),
        ("export GITHUB_TOKEN=$(gh auth token)", "scripts/dev.sh"),
        ('token = f"Bearer {access_token}"', "client/http.py"),
        ('headers["Authorization"] = "Bearer " + token', "client/http.py"),
        ("Authorization: Bearer <token>", "docs/api.md"),
        ("Authorization: Bearer $TOKEN", "docs/api.md"),
        ('curl -H "Authorization: Bearer ${API_TOKEN}" $URL', "scripts/get.sh"),
    ]
    for line, path in placeholders:
        c.neg(path, line, "a placeholder, an environment reference or code, not a value")

    examples = [
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "docs/aws.md"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "docs/aws.md"),
        ('AWS_ACCESS_KEY_ID="AKIAI44QH8DHBEXAMPLE"', "tests/test_s3.py"),
        ("AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY", ".env.example"),
        ("  accessKeyId: AKIAIOSFODNN7EXAMPLE", "config/example.yml"),
        ("The key AKIAIOSFODNN7EXAMPLE is AWS's documented example.", "docs/faq.md"),
    ]
    for line, path in examples:
        c.neg(path, line, "an AWS documented example key (published, cannot authenticate)")

    for i in range(8):
        label = ("CERTIFICATE", "PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE REQUEST")[i % 4]
        body = [c.b64bytes(48) for _ in range(4 + i % 3)] + [c.b64bytes(24)]
        lines = [f"-----BEGIN {label}-----", *body, f"-----END {label}-----"]
        text = patch(("certs/ca.pem", "keys/app.pub")[i % 2], lines, before=(), after=())
        c.add("negative", None, "patch", text, "a public PEM block (certificate or public key)")
    for i in range(8):
        kind, size = [("ssh-rsa", 279), ("ssh-ed25519", 51), ("ecdsa-sha2-nistp256", 104)][i % 3]
        key = "AAAA" + c.b64bytes(size)
        line = f"{kind} {key} dev{i}@laptop"
        c.neg(("deploy/authorized_keys", "docs/ssh.md")[i % 2], line, "an SSH public key")
    for i in range(6):
        pk = ("pk_live_", "pk_test_")[i % 2] + c.s(ALNUM, 24 + i)
        c.neg("web/checkout.js", f"const stripe = Stripe('{pk}');", "a Stripe publishable key")

    for i in range(10):
        data = c.b64bytes(60 + i * 10)
        line, path = [
            (f"![logo](data:image/png;base64,{data})", "README.md"),
            (f"  background: url(data:image/svg+xml;base64,{data});", "web/site.css"),
            (f'<img src="data:image/gif;base64,{data}" alt="spinner">', "web/index.html"),
            (f"//# sourceMappingURL=data:application/json;base64,{data}", "dist/app.js"),
            (f'    "icon": "data:image/webp;base64,{data}",', "manifest.json"),
        ][i % 5]
        c.neg(path, line, "a base64 data URI: content, not a credential")

    identifiers = [
        "class AbstractSingletonProxyFactoryBeanTests(unittest.TestCase):",
        "def test_redaction_keeps_the_line_structure_of_a_patch() -> None:",
        "SOME_VERY_LONG_CONSTANT_NAME_FOR_2024 = 1",
        "import com.example.project.service.impl.UserServiceImpl;",
        "from supervisor.sandbox.compile_bwrap import compile_bwrap_argv",
        'path = "src/components/UserProfileSettingsPanel/index.tsx"',
        "export const useInfiniteScrollPaginationWithPrefetch = () => {};",
        'LOGGER = logging.getLogger("supervisor.network.proxy.connection")',
        "  --extra-index-url https://download.pytorch.org/whl/cu121",
        "    url: https://github.com/agent-supervisor/agent-supervisor/releases",
        "See https://docs.python.org/3/library/dataclasses.html#dataclasses.field",
        '<div class="flex items-center justify-between rounded-lg px-4 py-2">',
        "RUN apt-get update && apt-get install -y --no-install-recommends build-essential",
        "    assert isinstance(result.findings[0].fingerprint, str)",
        "HTTP_429_TOO_MANY_REQUESTS_RETRY_AFTER_SECONDS = 30",
        "kubectl rollout restart deployment/payments-api-v2 -n production",
        "  image: ghcr.io/agent-supervisor/fake-model-server:2024.06.11",
        "java.lang.IllegalStateException: ConnectionPoolTimeoutException",
        "    at org.springframework.beans.factory.support.AbstractBeanFactory.getBean",
        'name = "agent-supervisor-integration-tests-linux-x86_64"',
        "$ python -m pytest tests/unit/test_redact.py::test_corpus_recall_and_fpr -q",
        "PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 python3 -m supervisor.cli.main",
        "const DEFAULT_TIMEOUT_MILLISECONDS_FOR_HTTP2_CONNECTIONS = 30_000;",
        'error_code = "ERR_SANDBOX_NAMESPACE_CREATION_FAILED_EPERM"',
        "  - node_modules/@typescript-eslint/eslint-plugin/dist/index.js",
        'version = "1.2.3-beta.4+build.20240611.linux.x86_64"',
        "CREATE INDEX idx_runs_created_at_state ON runs (created_at, state);",
        "    mock_process.return_value.communicate.return_value = (b'', b'')",
        "Content-Type: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "en_US.UTF-8 UTF-8",
        'phone = "+1-202-555-0143"',
        "created_at = 1718096400123456",
        "  timestamp: 2024-06-11T09:00:00.000000+00:00",
        "color: #1e90ff; border-color: #ff00aa;",
        'mongo_id = ObjectId("507f1f77bcf86cd799439011")',
        "etag = '\"33a64df551425fcc55e4d42a148795d9f25f89d4\"'",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "================================================================",
        "0123456789012345678901234567890123456789",
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "git@github.com:agent-supervisor/agent-supervisor.git",
        "https://user@bitbucket.org/team/repo.git",
        "DATABASE_URL=postgres://localhost:5432/app_development",
        "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
        "REDIS_URL=redis://:@localhost:6379/0",
        "http://admin:password@localhost:8080/",
        "https://user:pass@example.com/private",
        "amqp://guest:guest@localhost:5672//",
        "  url: jdbc:postgresql://db.internal:5432/shop?sslmode=require",
        "curl https://api.example.com/v1/items?page=2&per_page=100",
    ]
    exts = ("src/app.py", "README.md", "config/app.yml", "src/main.ts", "scripts/run.sh")
    for i, line in enumerate(identifiers):
        c.neg(exts[i % len(exts)], line, "an identifier, a path, a URL or other ordinary text")

    metadata = [
        'token_type = "bearer"',
        'password_field = "password"',
        'secret_name = "prod-db-credentials"',
        "max_tokens = 4096",
        "PASSWORD_MIN_LENGTH = 12",
        "  secretName: tls-payments-cert",
        "        secretKeyRef:",
        "  password_file: /run/secrets/db_password",
        'TOKEN_URL = "https://oauth2.googleapis.com/token"',
        'api_key_header = "X-API-Key"',
        "  POSTGRES_PASSWORD: postgres",
        "POSTGRES_PASSWORD=example",
        '  "invalid_token": "The token has expired, sign in again.",',
        "  forgot_password: Forgot your password?",
        '"login.password": "Password",',
        "token_count = len(tokens)",
        "has_password = user.password_hash is not None",
        "  require_token: true",
        "secret_version = 3",
        'password_reset_url = f"{base}/reset"',
        "csrf_token = request.cookies.get('csrftoken')",
        'NEXT_PAGE_TOKEN = "next_page_token"',
        "# the token is read from the keychain, never from a file",
        "Use a password manager; never commit a password.",
        "  - name: GITHUB_TOKEN",
        "    valueFrom: {secretKeyRef: {name: gh, key: token}}",
        "passwordless = True",
        "tokens_per_minute = 90_000",
        'secret_keys = ["SECRET_KEY", "API_TOKEN"]',
        'AUTH_HEADER = "Authorization"',
    ]
    for i, line in enumerate(metadata):
        c.neg(exts[i % len(exts)], line, "a credential word naming something that is not one")

    for i in range(20):
        tok_rule = i % 4
        if tok_rule == 0:
            secret_line = 'API_TOKEN = "ghp_' + c.fake(ALNUM, 36) + '"'
        elif tok_rule == 1:
            secret_line = "AWS_ACCESS_KEY_ID=AKIA" + c.fake(UPPER32, 16)
        elif tok_rule == 2:
            secret_line = 'DB_PASSWORD = "' + c.fake(ALNUM + "#!", 16) + '"'
        else:
            secret_line = "client = Client('" + c.b64bytes(30) + "')"
        if i % 2:
            text = patch(
                "app/config.py",
                ["TIMEOUT = 30"],
                before=("import os",),
                removed=(secret_line,),
                after=("",),
            )
            note = "a secret on a removed line: the user's existing content, not scanned"
        else:
            text = patch(
                "app/config.py",
                ["TIMEOUT = 30"],
                before=(secret_line,),
                after=("",),
            )
            note = "a secret on a context line: the user's existing content, not scanned"
        c.add("negative", None, "patch", text, note)

    for i in range(30):
        size = (20, 24, 32, 40)[i % 4]
        word_token = "".join(
            c.rnd.choice(("Config", "Manager", "Factory", "Handler", "Service", "Request"))
            for _ in range(6)
        )
        line, path = [
            (f"class {word_token}(Base):", "app/models.py"),
            (f"short = '{c.s(ALNUM, 12)}'", "tests/test_ids.py"),
            (f"item_{c.s(string.digits, size)}", "data/ids.txt"),
            (f"const HEX_SECRET_DIGEST = '{c.hexs(size)}';", "src/digest.ts"),
            (f'video_id = "{c.s(ALNUM, 11)}"', "app/media.py"),
            (f"{word_token.lower()}_{word_token.upper()}", "docs/glossary.md"),
        ][i % 6]
        c.neg(path, line, "a short id, a hex digest or a word-built identifier")

    crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for i in range(24):
        line, path = [
            (f'RUN_ID = "01{c.s(crockford, 24)}"', "tests/test_store.py"),
            (f"payments-api-{c.hexs(10)}-{c.s('bcdfghjklmnpqrstvwxz2456789', 5)}", "ops/pods.txt"),
            (f"require golang.org/x/net v0.0.0-2024061109{i:04d}-{c.hexs(12)}", "go.mod"),
            (f'<script src="/static/js/main.{c.hexs(20)}.chunk.js"></script>', "web/index.html"),
            (f"  - run-{c.hexs(8)}-{c.hexs(8)}-{c.hexs(8)}", "ci/cache.yml"),
            (f"docker pull registry.internal/app:build-{c.hexs(32)}", "scripts/pull.sh"),
        ][i % 6]
        c.neg(path, line, "an id, a pseudo-version or a content hash in a name")

    text_negs = [
        "Please set OPENAI_API_KEY before running the demo.",
        "The token field must not be empty.",
        "commit 3f2a9c1d7e5b4a6f8c0d2e4f6a8b0c2d4e6f8a0b",
        "run 550e8400-e29b-41d4-a716-446655440000 finished in 12.3s",
        "password: (hidden)",
    ]
    for text in text_negs:
        c.add("negative", None, "text", text + "\n", "plain text without a credential")


def build() -> Corpus:
    c = Corpus()
    positives(c)
    negatives(c)
    return c


def defang(line: str) -> str:
    for prefix in DEFANG:
        line = line.replace(prefix, prefix[0] + f"\\u{ord(prefix[1]):04x}" + prefix[2:])
    return line


def render(c: Corpus, label: str) -> str:
    rows = [r for r in c.records if r["label"] == label]
    return "".join(defang(json.dumps(r, ensure_ascii=True)) + "\n" for r in rows)


def main() -> int:
    c = build()
    for label, name in (("positive", "positives.jsonl"), ("negative", "negatives.jsonl")):
        (HERE / name).write_text(render(c, label), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
