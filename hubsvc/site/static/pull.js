// A pull request's own parts: the diff with comments on its lines, the review form
// (comment, approve, request changes), reviews in the conversation, its checks, and the
// merge box that names what holds the merge and merges in the chosen style.
import { post, postHtml } from "./api.js";
import { h, timeEl } from "./dom.js";
import { body, userLink } from "./views.js";

const VERDICT = {
  APPROVED: ["approved these changes", "approved"],
  CHANGES_REQUESTED: ["requested changes", "changes"],
  COMMENTED: ["reviewed", "commented"],
};
const WRITERS = ["write", "maintain", "admin", "owner"];
const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

function lineNote(c, pending) {
  return h(
    "div",
    { class: `line-note${pending ? " pending" : ""}` },
    pending ? h("span", { class: "muted" }, "Pending · ") : h("strong", {}, userLink(c.user), " "),
    body(c, ""),
  );
}

export function reviewItem(r) {
  const [what, tone] = VERDICT[r.state] || ["reviewed", ""];
  return h(
    "li",
    { class: `comment review review-${tone}`, "data-id": r.id },
    h(
      "div",
      { class: "comment-head" },
      h("strong", {}, userLink(r.user)),
      " ",
      h("span", { class: "verdict" }, what),
      " ",
      timeEl(r.submittedAt),
      r.stale ? h("span", { class: "badge" }, "outdated") : null,
    ),
    r.body ? body(r, "") : null,
    (r.comments || []).map((c) =>
      h("div", { class: "review-comment" }, h("p", { class: "mono muted" }, `${c.path}:${c.line}`), body(c, "")),
    ),
  );
}

export function statusList(statuses) {
  if (!statuses.length) return h("p", { class: "muted", id: "status-list" }, "No checks reported");
  const mark = { success: "✓", failure: "✗", error: "✗", pending: "●" };
  return h(
    "ul",
    { class: "plain", id: "status-list" },
    statuses.map((s) =>
      h("li", { class: `check s-${s.state}` }, h("span", { class: "mark" }, mark[s.state] || "●"), " ", h("strong", {}, s.context), s.description ? h("span", { class: "muted" }, ` ${s.description}`) : null),
    ),
  );
}

// The files, each line numbered on both sides; "+" on a line opens a comment for the review.
export function filesView(v, files, refresh) {
  const pending = []; // {path, line, side, body}: sent with the review
  const notes = []; // their notes under the lines, in the same order
  const count = h("span", { id: "pending-count", class: "muted" });
  const where = new Map(); // "path\nside\nline" → the line's element
  const showCount = () => {
    count.textContent = pending.length ? `${pending.length} pending comment${pending.length === 1 ? "" : "s"}` : "";
  };
  const open = (row, comment) => {
    if (row.nextSibling && row.nextSibling.classList && row.nextSibling.classList.contains("line-form")) return;
    const text = h("textarea", { rows: 3, class: "line-comment-body", "aria-label": `Comment on line ${comment.line}` });
    const add = h("button", { type: "submit", class: "primary add-line-comment" }, "Add review comment");
    const cancel = h("button", { type: "button" }, "Cancel");
    const form = h("form", { class: "line-form" }, text, h("div", { class: "actions" }, cancel, add));
    cancel.addEventListener("click", () => form.remove());
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (!text.value.trim()) return;
      const c = { ...comment, body: text.value };
      const note = lineNote(c, true);
      pending.push(c);
      notes.push(note);
      form.replaceWith(note);
      showCount();
    });
    row.after(form);
    text.focus();
  };
  const fileBlock = (f) => {
    const rows = [];
    let oldLine = 0;
    let newLine = 0;
    for (const text of (f.patch || "").split("\n")) {
      const hunk = HUNK.exec(text);
      let side = null;
      let line = null;
      let kind = "";
      let shownOld = "";
      let shownNew = "";
      if (hunk) {
        oldLine = Number(hunk[1]);
        newLine = Number(hunk[2]);
        kind = "hunk";
      } else if (text.startsWith("+")) {
        [kind, side, line, shownNew] = ["add", "RIGHT", newLine, newLine];
        newLine += 1;
      } else if (text.startsWith("-")) {
        [kind, side, line, shownOld] = ["del", "LEFT", oldLine, oldLine];
        oldLine += 1;
      } else if (text.startsWith(" ")) {
        [side, line, shownOld, shownNew] = ["RIGHT", newLine, oldLine, newLine];
        oldLine += 1;
        newLine += 1;
      } else continue;
      const button =
        v.me && v.item.state === "open" && side
          ? h("button", { type: "button", class: "add-comment", "aria-label": `Comment on line ${line}`, title: "Comment on this line" }, "+")
          : h("span", {});
      const row = h(
        "div",
        { class: `dl ${kind}`, "data-line": line ?? "", "data-side": side ?? "" },
        h("span", { class: "ln" }, String(shownOld)),
        h("span", { class: "ln" }, String(shownNew)),
        button,
        h("span", { class: "code" }, text || " "),
      );
      if (side) {
        where.set(`${f.path}\n${side}\n${line}`, row);
        if (button.tagName === "BUTTON") button.addEventListener("click", () => open(row, { path: f.path, line, side }));
      }
      rows.push(row);
    }
    return h(
      "div",
      { class: "pr-file", "data-path": f.path },
      h(
        "p",
        { class: "mono file-head" },
        h("strong", {}, f.path),
        f.oldPath && f.oldPath !== f.path ? ` (from ${f.oldPath})` : "",
        ` ${f.status} `,
        h("span", { class: "plus" }, `+${f.additions}`),
        " ",
        h("span", { class: "minus" }, `−${f.deletions}`),
      ),
      f.binary ? h("p", { class: "muted" }, "binary file") : h("div", { class: "diff lines" }, rows),
      f.truncated ? h("p", { class: "muted" }, "(cut: too large to show in full)") : null,
    );
  };
  const blocks = files.map(fileBlock);
  // The comments of earlier reviews under the lines they were made on.
  for (const r of v.reviews || []) {
    for (const c of r.comments || []) {
      const row = where.get(`${c.path}\n${c.side}\n${c.line}`);
      if (row && !r.stale) row.after(lineNote({ ...c, user: r.user }, false));
    }
  }
  return [blocks, v.me && v.item.state === "open" ? reviewForm(v, pending, notes, count, showCount, refresh) : null];
}

function reviewForm(v, pending, notes, count, showCount, refresh) {
  const mine = v.item.author && v.item.author.username === v.me.username;
  const choices = mine ? [["COMMENT", "Comment"]] : [["COMMENT", "Comment"], ["APPROVE", "Approve"], ["REQUEST_CHANGES", "Request changes"]];
  const text = h("textarea", { id: "review-body", rows: 3, placeholder: "Leave a review (Markdown)", "aria-label": "Review" });
  const message = h("p", { class: "error", role: "alert", id: "review-error" });
  const radios = choices.map(([value, label], i) =>
    h("label", { class: "choice" }, h("input", { type: "radio", name: "verdict", value, checked: i === 0, id: `verdict-${value.toLowerCase()}` }), ` ${label}`),
  );
  const submit = h("button", { type: "submit", class: "primary", id: "submit-review" }, "Submit review");
  const form = h(
    "form",
    { class: "card review-form", id: "review-form" },
    h("h3", {}, "Finish your review ", count),
    text,
    h("div", { class: "choices" }, radios),
    h("div", { class: "actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    submit.disabled = true;
    const event = form.querySelector("input[name=verdict]:checked").value;
    try {
      const made = (await postHtml(`${v.base}/reviews`, { event, body: text.value, comments: pending })).review;
      // The notes as the server rendered them, in the order they were sent.
      notes.forEach((note, i) => {
        const c = made.comments[i];
        if (c) note.replaceWith(lineNote({ ...c, user: made.user }, false));
      });
      pending.length = 0;
      notes.length = 0;
      showCount();
      text.value = "";
      await refresh();
    } catch (err) {
      message.textContent = err.message || "The review was not sent.";
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

// What holds the merge (the server's mergeProblems: conflicts, protection's named needs),
// and for writers the style and the button; the merge sends the head it was shown.
export function mergeBox(v, refresh) {
  const it = v.item;
  if (it.merged) {
    return h(
      "section",
      { class: "merge-box merged", id: "merge-box" },
      h("h3", {}, "Merged"),
      h("p", {}, userLink(it.mergedBy), " merged this into ", h("code", {}, it.base), " ", timeEl(it.mergedAt), it.mergeCommit ? [" as ", h("code", {}, it.mergeCommit.slice(0, 7))] : ""),
    );
  }
  if (it.state !== "open") {
    return h("section", { class: "merge-box closed", id: "merge-box" }, h("h3", {}, "Closed without merging"));
  }
  const problems = it.mergeProblems || [];
  const checking = it.mergeable === null && !problems.length;
  const title = problems.length ? "Merging is blocked" : checking ? "Checking whether it merges cleanly…" : "Ready to merge";
  const writer = v.me && WRITERS.includes(v.repo.permission);
  const method = h(
    "select",
    { id: "merge-method", "aria-label": "Merge style" },
    [["merge", "Create a merge commit"], ["squash", "Squash and merge"], ["fast-forward", "Fast-forward"]].map(([value, label]) => h("option", { value }, label)),
  );
  const button = h("button", { type: "button", class: "primary", id: "merge", disabled: problems.length > 0 }, "Merge pull request");
  const message = h("p", { class: "error", role: "alert", id: "merge-error" });
  button.addEventListener("click", async () => {
    message.textContent = "";
    button.disabled = true;
    button.textContent = "Merging…";
    try {
      await post(`${v.base}/merge`, { method: method.value, sha: it.headSha });
      await refresh();
    } catch (err) {
      message.textContent = err.message || "Not merged.";
      button.disabled = false;
      button.textContent = "Merge pull request";
    }
  });
  return h(
    "section",
    { class: `merge-box ${problems.length ? "blocked" : "ready"}`, id: "merge-box" },
    h("h3", {}, title),
    problems.length ? h("ul", { id: "merge-problems" }, problems.map((p) => h("li", {}, p))) : null,
    writer ? h("div", { class: "actions merge-actions" }, method, button) : h("p", { class: "muted" }, "Only people with write access can merge."),
    message,
  );
}
