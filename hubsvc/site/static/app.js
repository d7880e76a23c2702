// The page's router: #/sign-in, #/sign-up, #/ (activity), #/repos, #/new, #/search,
// #/security, #/u/name, #/r/owner/name/…; a forge's path (/owner/name/issues/3, which
// the server answers with this page) becomes its #/ route.
import { ApiError, get, post } from "./api.js";
import { h, mount, refreshTimes } from "./dom.js";
import { showActivity, stopActivity } from "./activity.js";
import { leaveInbox, showInbox, startInbox, stopInbox } from "./inbox.js";
import { stopWatching } from "./live.js";
import { showNewRepo, showRepo, showRepos, showSearch, showUser } from "./repo.js";
import { showSecondFactor, showSecurity } from "./security.js";
import { leaveThread } from "./thread.js";

let me = null;
let openSignUp = false;
let metaRead = Promise.resolve();
// What may be read without signing in (public repositories and people); the rest asks.
const OPEN = ["r", "u", "sign-in", "sign-up"];
const ROOT_WORDS = ["api", "auth", "chat", "health", "ui", "ws"];

// "/owner/name/issues/3" → "#/r/owner/name/issues/3", "/ada" → "#/u/ada"; else null.
function hashOfPath(pathname) {
  const parts = pathname.split("/").filter(Boolean);
  if (!parts.length || ROOT_WORDS.includes(parts[0])) return null;
  return parts.length === 1 ? `#/u/${parts[0]}` : `#/r/${parts.join("/")}`;
}

function applyTheme(theme) {
  // "system" leaves it to prefers-color-scheme in the style sheet.
  document.documentElement.dataset.theme = ["light", "dark"].includes(theme) ? theme : "system";
}

function showMe() {
  document.getElementById("nav").hidden = !me;
  document.getElementById("sign-out").hidden = !me;
  document.getElementById("sign-in-link").hidden = !!me;
  document.getElementById("sign-up-link").hidden = !!me || !openSignUp;
  const who = document.getElementById("who");
  who.replaceChildren(me ? h("a", { href: `#/u/${encodeURIComponent(me.username)}` }, me.username) : "");
}

async function loadMe() {
  try {
    me = (await get("/api/users/me")).user;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) me = null;
    else throw err;
  }
  showMe();
  if (me) startInbox();
  else stopInbox();
  if (me) {
    try {
      const settings = (await get("/api/users/me/settings")).settings;
      applyTheme(settings.preferences && settings.preferences.theme);
    } catch (_) {
      applyTheme("system");
    }
  }
  return me;
}

function showSignIn() {
  stopActivity();
  const message = h("p", { id: "sign-in-error", class: "error", role: "alert" });
  const login = h("input", { id: "login", name: "login", autocomplete: "username", required: true });
  const password = h("input", {
    id: "password",
    name: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const form = h(
    "form",
    { id: "sign-in", class: "card narrow" },
    h("h1", {}, "Sign in"),
    h("label", { for: "login" }, "Username or e-mail"),
    login,
    h("label", { for: "password" }, "Password"),
    password,
    h("button", { type: "submit" }, "Sign in"),
    message,
    openSignUp
      ? h("p", { class: "muted" }, "No account yet? ", h("a", { href: "#/sign-up", id: "to-sign-up" }, "Create one"), ".")
      : h("p", { class: "muted" }, "No account yet? An administrator makes one (python run.py create-user)."),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    const body = { password: password.value };
    body[login.value.includes("@") ? "email" : "username"] = login.value.trim();
    let answer;
    try {
      answer = await post("/auth/sign-in", body);
    } catch (err) {
      if (err.status === 401) message.textContent = "Wrong username, e-mail or password.";
      else if (err.status === 429)
        message.textContent = `Too many attempts: try again in ${err.retryAfter || "a few"} seconds.`;
      else message.textContent = err.message || "Sign-in failed.";
      return;
    }
    if (answer.twoFactorRequired) showSecondFactor(answer, signedIn, showSignIn);
    else await signedIn();
  });
  mount(form);
  login.focus();
}

// POST /auth/sign-up: the server answers with the session cookie set.
function showSignUp() {
  stopActivity();
  const message = h("p", { id: "sign-up-error", class: "error", role: "alert" });
  const field = (id, label, attrs) => [h("label", { for: id }, label), h("input", { id, name: id, required: true, ...attrs })];
  const form = h(
    "form",
    { id: "sign-up", class: "card narrow" },
    h("h1", {}, "Create your account"),
    field("new-username", "Username", { autocomplete: "username", maxlength: 39 }),
    field("new-name", "Name", { autocomplete: "name", required: false, maxlength: 100 }),
    field("new-email", "E-mail", { type: "email", autocomplete: "email" }),
    field("new-password", "Password", { type: "password", autocomplete: "new-password", minlength: 8 }),
    h("button", { type: "submit", class: "primary" }, "Create account"),
    message,
    h("p", { class: "muted" }, "Have one? ", h("a", { href: "#/sign-in" }, "Sign in"), "."),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    const value = (id) => form.querySelector(`#${id}`).value;
    try {
      await post("/auth/sign-up", {
        username: value("new-username").trim(),
        name: value("new-name").trim(),
        email: value("new-email").trim(),
        password: value("new-password"),
      });
    } catch (err) {
      message.textContent = err.message || "Sign-up failed.";
      return;
    }
    await signedIn();
  });
  mount(form);
  form.querySelector("input").focus();
}

async function signedIn() {
  await loadMe();
  // Back to the page that asked for the sign-in, else the activity.
  const next = sessionStorage.getItem("next") || "#/";
  sessionStorage.removeItem("next");
  // A hash change routes by itself; routing here too would open the feed twice.
  if (location.hash === next) route();
  else location.hash = next;
}

async function signOut() {
  stopActivity();
  stopInbox();
  try {
    await post("/auth/sign-out");
  } catch (_) {
    // Already signed out: the page shows the form either way.
  }
  me = null;
  showMe();
  applyTheme("system");
  location.hash = "#/sign-in";
}

async function route() {
  // #/path/parts?state=…&page=…: each part decoded on its own, so a branch may hold "/".
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?", 2);
  const parts = path.split("/").map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  stopWatching();
  leaveThread();
  leaveInbox();
  if (!me && !OPEN.includes(parts[0])) {
    if (parts[0]) sessionStorage.setItem("next", location.hash);
    location.hash = "#/sign-in";
    return;
  }
  if (parts[0] === "sign-in" || parts[0] === "sign-up") {
    await metaRead;
    if (me) location.hash = "#/";
    else if (parts[0] === "sign-up" && openSignUp) showSignUp();
    else showSignIn();
    return;
  }
  if (parts[0] === "r" && parts.length >= 3) {
    stopActivity();
    await showRepo(parts[1], parts[2], parts.slice(3).filter(Boolean), params, me);
  } else if (parts[0] === "u" && parts[1]) {
    stopActivity();
    await showUser(parts[1]);
  } else if (parts[0] === "inbox") {
    stopActivity();
    await showInbox(params);
  } else if (parts[0] === "new") {
    stopActivity();
    showNewRepo(me);
  } else if (parts[0] === "repos") {
    stopActivity();
    await showRepos(me);
  } else if (parts[0] === "security") {
    stopActivity();
    await showSecurity();
  } else if (parts[0] === "search") {
    stopActivity();
    await showSearch(parts[1] || "", parts[2] || "repositories");
  } else {
    await showActivity();
  }
}

// A link to a forge's path on this server (rendered Markdown's #12 and @ada) opens its
// #/ route in place instead of loading the page again.
function inPage(ev) {
  const a = ev.target.closest && ev.target.closest("a[href]");
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  // "Sign in" from a page anyone may read comes back to that page afterwards.
  if (["#/sign-in", "#/sign-up"].includes(a.getAttribute("href")) && /^#\/(r|u)\//.test(location.hash)) {
    sessionStorage.setItem("next", location.hash);
  }
  const url = new URL(a.href, location.href);
  const hash = url.origin === location.origin && !url.hash ? hashOfPath(url.pathname) : null;
  if (!hash) return;
  ev.preventDefault();
  location.hash = hash;
}

async function start() {
  if (location.pathname !== "/") {
    history.replaceState(null, "", `/${hashOfPath(location.pathname) || "#/"}`);
  }
  document.getElementById("sign-out").addEventListener("click", signOut);
  document.addEventListener("click", inPage);
  window.addEventListener("hashchange", () => route().catch(fail));
  setInterval(refreshTimes, 30000);
  // Whether sign-up is open matters to the sign-in and sign-up pages only: they wait for it.
  metaRead = get("/api/meta")
    .then((meta) => {
      openSignUp = !!meta.openSignUp;
      showMe();
    })
    .catch(() => {});
  await loadMe();
  await route();
}

function fail(err) {
  const missing = err instanceof ApiError && err.status === 404;
  mount(
    h(
      "p",
      { class: "error", role: "alert" },
      missing ? "Nothing here: not found, or not yours to read." : `Something went wrong: ${err.message || err}`,
      missing && !me ? [" If it is private, ", h("a", { href: "#/sign-in" }, "sign in"), "."] : null,
    ),
  );
}

start().catch(fail);
