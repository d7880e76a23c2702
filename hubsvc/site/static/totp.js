// The authenticator app's card on #/security: set it up (QR code, code, recovery codes) or turn it off.
import { api, post } from "./api.js";
import { h } from "./dom.js";

function problem(err) {
  if (err && err.status === 429) return `Too many attempts: try again in ${err.retryAfter || "a few"} seconds.`;
  if (err && err.status === 422) return "That code was not accepted.";
  return (err && err.message) || "That did not work.";
}

// An <img> of the server's SVG: img-src allows data:, and an image runs no script.
function qrImage(svg) {
  return h("img", {
    id: "totp-qr",
    alt: "QR code of the authenticator app's secret",
    src: "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg),
  });
}

function codeInput(id, label) {
  return [
    h("label", { for: id }, label),
    h("input", { id, name: id, autocomplete: "one-time-code", inputmode: "numeric", spellcheck: "false", required: true }),
  ];
}

// The card for `state` ({totp, recoveryCodesLeft}); done() redraws the whole page.
export function totpCard(state, done) {
  const card = h("section", { class: "card", id: "totp" });
  const message = () => h("p", { id: "totp-message", class: "error", role: "alert" });

  function showRecoveryCodes(codes) {
    const ok = h("button", { id: "totp-done", type: "button" }, "I have saved them");
    ok.addEventListener("click", () => done());
    card.replaceChildren(
      h("h1", {}, "Authenticator app is on"),
      h("p", {}, "Keep these recovery codes somewhere safe: each signs in once in place of a code. They are not shown again."),
      h("ul", { id: "recovery-codes" }, codes.map((c) => h("li", {}, h("code", {}, c)))),
      ok,
    );
  }

  function showEnrolment(answer) {
    const note = message();
    const form = h(
      "form",
      { id: "totp-confirm" },
      codeInput("totp-code", "Code from the app"),
      h("button", { type: "submit" }, "Turn on"),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      note.textContent = "";
      try {
        const { recoveryCodes } = await post("/api/users/me/2fa/totp/confirm", {
          code: form.querySelector("#totp-code").value.trim(),
        });
        showRecoveryCodes(recoveryCodes);
      } catch (err) {
        note.textContent = problem(err);
      }
    });
    card.replaceChildren(
      h("h1", {}, "Set up an authenticator app"),
      h("p", {}, "Scan this code with the app, or type the secret into it, then enter the code it shows."),
      qrImage(answer.qrSvg),
      h("p", {}, "Secret: ", h("code", { id: "totp-secret" }, answer.secret)),
      form,
      note,
    );
    form.querySelector("#totp-code").focus();
  }

  function showOff() {
    const note = message();
    const start = h("button", { id: "totp-setup", type: "button" }, "Set up an authenticator app");
    start.addEventListener("click", async () => {
      start.disabled = true;
      try {
        showEnrolment(await post("/api/users/me/2fa/totp"));
      } catch (err) {
        note.textContent = problem(err);
        start.disabled = false;
      }
    });
    card.replaceChildren(
      h("h1", {}, "Authenticator app"),
      h("p", { class: "muted" }, "An app such as a phone's authenticator gives a new code every 30 seconds."),
      start,
      note,
    );
  }

  function showOn() {
    const note = message();
    const form = h(
      "form",
      { id: "totp-off" },
      h("label", { for: "totp-off-password" }, "Password"),
      h("input", { id: "totp-off-password", type: "password", autocomplete: "current-password", required: true }),
      codeInput("totp-off-code", "Code from the app, or a recovery code"),
      h("button", { type: "submit" }, "Turn off"),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      note.textContent = "";
      try {
        await api("DELETE", "/api/users/me/2fa/totp", {
          currentPassword: form.querySelector("#totp-off-password").value,
          code: form.querySelector("#totp-off-code").value.trim(),
        });
      } catch (err) {
        note.textContent = problem(err);
        return;
      }
      done();
    });
    card.replaceChildren(
      h("h1", {}, "Authenticator app"),
      h("p", { id: "totp-on" }, `On. ${state.recoveryCodesLeft} recovery codes left.`),
      form,
      note,
    );
  }

  if (state.totp) showOn();
  else showOff();
  return card;
}
