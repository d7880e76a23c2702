"""Chat account linking: link tokens, the verification page, verify, unlink and status."""

from __future__ import annotations

import html
import logging
import secrets
import time
from string import Template
from typing import Any

from aiohttp import web

from schemas.chat import (
    GenerateResultSchema,
    GenerateSchema,
    LinkPageQuerySchema,
    StatusSchema,
    UnlinkResultSchema,
    UnlinkSchema,
    VerifyResultSchema,
    VerifySchema,
)

from ..config import Config
from ..errors import Forbidden, NotFound
from ..keys import CONFIG, STORE
from ..notify.mail import MAILER
from ..policy import requires
from ..tasks import BACKGROUND
from ..timeutil import iso
from ..web import present
from ..web.auth import (
    bot_key_ok,
    current_user,
    require_bot,
    require_user,
    token_digest,
)
from ..web.openapi import doc
from ..web.rest import json_response, read_json, read_query

log = logging.getLogger("hubsvc.chat")
routes = web.RouteTableDef()

BOT_ONLY = (
    "Needs the chat bot's key in `X-Chat-Bot-Key`; without it, or with a wrong one, "
    "the answer is 401."
)
BOT_OR_OWNER = (
    "Takes the chat bot's key (`X-Chat-Bot-Key`) or the signed-in user the chat "
    "id is linked to; any other signed-in user gets 404, so links do not leak."
)


def _link_url(config: Config, token: str) -> str:
    return f"{config.base_url}/chat/link?token={token}"


@routes.post("/api/chat/link/generate")
@doc(
    "Create a one-time link token for a chat user (chat bot only)",
    body=GenerateSchema,
    responses={200: GenerateResultSchema},
    description=BOT_ONLY + " The token is 64 lowercase hex characters, single use, valid "
    "chat.link_token_minutes. With serviceEmail, the account with that address (if any) is "
    "e-mailed the verification link, and only that account may redeem the token; the "
    "answer is the same whether or not such an account exists.",
)
@requires("bot.key")
async def generate(request: web.Request) -> web.Response:
    require_bot(request)
    data = await read_json(request, GenerateSchema())
    config = request.app[CONFIG]
    token = secrets.token_hex(32)
    minutes = config["chat"]["link_token_minutes"]
    expires = int(time.time()) + minutes * 60
    email = data.get("serviceEmail")
    user = await request.app[STORE].chat.add_token(
        token_digest(token), data["chatId"], expires, email
    )
    if email is not None:
        # Off the request path: neither the answer nor its timing tells whether the
        # address has an account.
        request.app[BACKGROUND].spawn(_mail_link(request.app, user, data["chatId"], token, minutes))
    return json_response(
        {
            "success": True,
            "token": token,
            "expiresAt": iso(expires),
            "url": _link_url(config, token),
        }
    )


async def _mail_link(
    app: web.Application, user: dict[str, Any] | None, chat_id: str, token: str, minutes: int
) -> None:
    """E-mail the verification link to user (nothing when no account matched)."""
    if user is None:
        return
    config = app[CONFIG]
    body = (
        f"Hello {user['name'] or user['username']},\n\n"
        f'Someone asked to link the chat account "{chat_id}" to your account '
        f'"{user["username"]}" on {config.base_url}.\n\n'
        f"To link them, open this page within {minutes} minutes and confirm:\n\n"
        f"{_link_url(config, token)}\n\n"
        "If you did not ask for this, ignore this e-mail: nothing is linked until you confirm.\n"
    )
    try:
        # Queued: a failure is retried and shows in GET /api/admin/deliveries.
        await app[MAILER].send(user["email"], "Link your chat account", body)
    except Exception as exc:
        log.warning(
            "could not send the chat link e-mail to user %s: %s: %s",
            user["id"],
            type(exc).__name__,
            exc,
        )


@routes.post("/api/chat/link/verify")
@doc(
    "Redeem a link token: link its chat id to the signed-in user",
    body=VerifySchema,
    responses={200: VerifyResultSchema},
    errors=(403,),
    description="Needs a signed-in session (the cookie, or the sign-in token as Bearer); a "
    "personal access token or the bot key is 403. "
    "serviceUserId must be the signed-in user's id (else 403). A bad, used or "
    "expired token is 400; a token e-mailed to another account is 403. An earlier link "
    "of the same chat id is replaced.",
)
@requires("chat.verify")
async def verify(request: web.Request) -> web.Response:
    user = require_user(request)
    # A link lets the bot act as the user, so it is granted as a credential is: by the
    # user in a signed-in session, never by a personal access token a script holds
    # (the policy's PERSON_ONLY actions).
    data = await read_json(request, VerifySchema())
    if data["serviceUserId"] != str(user["id"]):
        raise Forbidden("serviceUserId: must be the signed-in user")
    chat_id = await request.app[STORE].chat.redeem(token_digest(data["token"]), user["id"])
    return json_response(
        {
            "success": True,
            "linked": True,
            "chatId": chat_id,
            "user": present.user_summary(request.app[CONFIG].base_url, user),
        }
    )


@routes.post("/api/chat/link/unlink")
@doc(
    "Remove the link of a chat id",
    body=UnlinkSchema,
    responses={200: UnlinkResultSchema},
    errors=(404,),
    description=BOT_OR_OWNER,
)
@requires("chat.unlink")
async def unlink(request: web.Request) -> web.Response:
    bot = bot_key_ok(request)
    user = None if bot else require_user(request)
    data = await read_json(request, UnlinkSchema())
    chats = request.app[STORE].chat
    if user is None:
        removed = await chats.unlink(data["chatId"])
    else:
        removed = await chats.unlink(data["chatId"], user["id"])
        if not removed:
            raise NotFound("chat link not found")
    return json_response({"success": True, "unlinked": removed})


@routes.get("/api/chat/link/status/{chatId}")
@doc(
    "Whether a chat id is linked, and to whom",
    responses={200: StatusSchema},
    errors=(404,),
    description=BOT_OR_OWNER,
)
@requires("user.read")
async def status(request: web.Request) -> web.Response:
    bot = bot_key_ok(request)
    user = None if bot else require_user(request)
    link = await request.app[STORE].chat.link(request.match_info["chatId"])
    if user is not None and (link is None or link["user"]["id"] != user["id"]):
        raise NotFound("chat link not found")
    if link is None:
        return json_response({"linked": False, "verified": False, "user": None})
    return json_response(
        {
            "linked": True,
            "verified": link["verified"],
            "user": present.user_summary(request.app[CONFIG].base_url, link["user"]),
        }
    )


# The verification page. Everything interpolated is escaped; the only script and style
# are inline ones carrying the per-response nonce that the Content-Security-Policy allows.
PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Link chat account</title>
<style nonce="$nonce">
body { font: 16px/1.5 system-ui, sans-serif; color: #1f2328; background: #f6f8fa; margin: 0; }
main { max-width: 26rem; margin: 4rem auto; padding: 1.5rem 2rem; background: #fff;
       border: 1px solid #d0d7de; border-radius: 8px; }
h1 { font-size: 1.25rem; margin-top: 0; }
label { display: block; margin: .75rem 0 .25rem; font-weight: 600; }
input { width: 100%; box-sizing: border-box; padding: .4rem .5rem; font: inherit;
        border: 1px solid #d0d7de; border-radius: 6px; }
button { margin-top: 1rem; padding: .45rem 1rem; font: inherit; font-weight: 600;
         color: #fff; background: #1f883d; border: 0; border-radius: 6px; cursor: pointer; }
button.link { color: #0969da; background: none; padding: 0; font-weight: normal; }
button[disabled] { opacity: .6; cursor: default; }
.error { color: #d1242f; }
.done { color: #1a7f37; font-weight: 600; }
code { word-break: break-all; }
</style>
</head>
<body>
<main id="app" data-token="$token" data-user-id="$user_id" data-chat-id="$chat_id">
<h1>Link chat account</h1>
<div id="invalid"$invalid_hidden>
<p>This link is invalid, already used or expired. Ask the chat bot for a new one.</p>
</div>
<form id="signin"$signin_hidden>
<p>Sign in to link the chat account <code>$chat_id</code> to your account.</p>
<label for="login">Username or e-mail</label>
<input id="login" name="login" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<div id="confirm"$confirm_hidden>
<p>Link chat account <code>$chat_id</code> to <strong id="who">$username</strong>?</p>
<button type="button" id="confirm-button">Confirm</button>
<p><button type="button" class="link" id="switch">Use another account</button></p>
</div>
<p id="result" class="done" role="status" hidden></p>
<p id="error" class="error" role="alert" hidden></p>
</main>
<script nonce="$nonce">
(function () {
  "use strict";
  var app = document.getElementById("app");
  var userId = app.dataset.userId;
  function byId(id) { return document.getElementById(id); }
  function say(id, text) { byId(id).textContent = text; byId(id).hidden = !text; }
  function post(path, body) {
    return fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)
    }).then(function (resp) {
      return resp.json().catch(function () { return {}; }).then(function (data) {
        if (!resp.ok) { throw new Error(data.error || "request failed (" + resp.status + ")"); }
        return data;
      });
    });
  }
  byId("signin").addEventListener("submit", function (event) {
    event.preventDefault();
    say("error", "");
    var login = byId("login").value.trim();
    var body = {password: byId("password").value};
    body[login.indexOf("@") >= 0 ? "email" : "username"] = login;
    post("../auth/sign-in", body).then(function (data) {
      userId = data.user.id;
      byId("who").textContent = data.user.username;
      byId("password").value = "";
      byId("signin").hidden = true;
      byId("confirm").hidden = false;
    }).catch(function (err) { say("error", err.message); });
  });
  byId("confirm-button").addEventListener("click", function () {
    var button = byId("confirm-button");
    button.disabled = true;
    say("error", "");
    post("../api/chat/link/verify", {token: app.dataset.token, serviceUserId: userId})
      .then(function (data) {
        byId("confirm").hidden = true;
        say("result", "Linked chat account " + app.dataset.chatId + " to " +
            data.user.username + ". You can close this page.");
      }).catch(function (err) { button.disabled = false; say("error", err.message); });
  });
  byId("switch").addEventListener("click", function () {
    say("error", "");
    post("../auth/sign-out", {}).catch(function () { return null; }).then(function () {
      byId("confirm").hidden = true;
      byId("signin").hidden = false;
    });
  });
})();
</script>
</body>
</html>
""")

PAGE_RESPONSE = {
    "description": "an HTML page",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


@routes.get("/chat/link")
@doc(
    "The page a verification link opens: sign in if needed, then confirm the link",
    query=LinkPageQuerySchema,
    responses={200: PAGE_RESPONSE},
    public=True,
    description="Looking at the page does not use up the token; only verify does. An "
    "unknown, used or expired token still gets the page, which says so.",
)
@requires("public")
async def link_page(request: web.Request) -> web.Response:
    # A schema of its own, so the link token is not kept among the loaded queries.
    token = read_query(request, LinkPageQuerySchema())["token"]
    chat_id = await request.app[STORE].chat.token_chat_id(token_digest(token)) if token else None
    user = current_user(request)
    step = "invalid" if chat_id is None else "confirm" if user else "signin"
    nonce = secrets.token_urlsafe(18)
    page = PAGE.substitute(
        nonce=nonce,
        token=html.escape(token),
        chat_id=html.escape(chat_id or ""),
        user_id=html.escape(str(user["id"]) if user else ""),
        username=html.escape(user["username"] if user else ""),
        **{
            f"{name}_hidden": "" if step == name else " hidden"
            for name in ("invalid", "signin", "confirm")
        },
    )
    headers = {
        "Content-Security-Policy": (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
        ),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        # The token is in the address: keep it out of Referer headers and caches.
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    return web.Response(text=page, content_type="text/html", charset="utf-8", headers=headers)
