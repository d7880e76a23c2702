// The page's router: #/sign-in, #/ (activity), #/repos, #/search, #/security, #/r/owner/name/…
import { ApiError, get, post } from "./api.js";
import { h, mount, refreshTimes } from "./dom.js";
import { showActivity, stopActivity } from "./activity.js";
import { showRepo, showRepos, showSearch } from "./repo.js";
import { showSecondFactor, showSecurity } from "./security.js";

let me = null;

function applyTheme(theme) {
  // "system" leaves it to prefers-color-scheme in the style sheet.
  document.documentElement.dataset.theme = ["light", "dark"].includes(theme) ? theme : "system";
}

function showUser() {
  document.getElementById("nav").hidden = !me;
  document.getElementById("sign-out").hidden = !me;
  document.getElementById("who").textContent = me ? me.username : "";
}

async function loadMe() {
  try {
    me = (await get("/api/users/me")).user;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) me = null;
    else throw err;
  }
  showUser();
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
    h(
      "p",
      { class: "muted" },
      "No account yet? An administrator makes one (python run.py create-user); " +
        "where sign-up is open, POST /auth/sign-up makes your own (README).",
    ),
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

async function signedIn() {
  await loadMe();
  // A hash change routes by itself; routing here too would open the feed twice.
  if (location.hash === "#/") route();
  else location.hash = "#/";
}

async function signOut() {
  stopActivity();
  try {
    await post("/auth/sign-out");
  } catch (_) {
    // Already signed out: the page shows the form either way.
  }
  me = null;
  showUser();
  applyTheme("system");
  location.hash = "#/sign-in";
}

async function route() {
  // #/path/parts?state=…&page=…: each part decoded on its own, so a branch may hold "/".
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?", 2);
  const parts = path.split("/").map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  if (!me && parts[0] !== "sign-in") {
    location.hash = "#/sign-in";
    return;
  }
  if (parts[0] === "sign-in") {
    if (me) location.hash = "#/";
    else showSignIn();
    return;
  }
  if (parts[0] === "r" && parts.length >= 3) {
    stopActivity();
    await showRepo(parts[1], parts[2], parts.slice(3).filter(Boolean), params);
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

async function start() {
  document.getElementById("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", () => route().catch(fail));
  setInterval(refreshTimes, 30000);
  await loadMe();
  await route();
}

function fail(err) {
  mount(h("p", { class: "error", role: "alert" }, `Something went wrong: ${err.message || err}`));
}

start().catch(fail);
