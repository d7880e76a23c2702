// One issue or pull request: its body and timeline as the server rendered them, its
// labels, assignees and state, and the forms that act on it, all through the public API.
// What a form changes shows at once and is then read again when its live event comes.
import { ApiError, api, get, getHtml, patch, post, postHtml, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { watchRepo } from "./live.js";
import { milestoneSelect, reactionBar } from "./planning.js";
import { filesView, mergeBox, reviewItem, statusList } from "./pull.js";
import { body, crumbs, labelChip, q, repoHash, section, userLink, words } from "./views.js";

const NOUN = { issues: "issues", pulls: "pull requests" };
const WRITERS = ["write", "maintain", "admin", "owner"];
let view = null; // the thread shown: {owner, name, kind, number, base, me, repo, item}
let refreshTimer = null;

const stateOf = (item) => (item.merged ? "merged" : item.state);

function stateChip(item) {
  return h("span", { class: `state s-${stateOf(item)}`, id: "state" }, stateOf(item));
}

function header(v) {
  const it = v.item;
  const pull = v.kind === "pulls";
  return h(
    "div",
    { id: "thread-head" },
    h("h1", { id: "thread-title" }, it.title, " ", h("span", { class: "muted" }, `#${it.number}`)),
    h(
      "p",
      { class: "meta" },
      stateChip(it),
      " ",
      pull && it.merged ? userLink(it.mergedBy) : userLink(it.author),
      pull ? [` ${it.merged ? "merged" : it.state === "open" ? "wants to merge" : "proposed merging"} `, h("code", {}, it.head), " into ", h("code", {}, it.base)] : " opened this",
      " ",
      timeEl(pull && it.merged ? it.mergedAt : it.createdAt),
    ),
  );
}

function commentItem(c, pending = false) {
  const v = view;
  return h(
    "li",
    { class: `comment${pending ? " pending" : ""}`, "data-id": c.id || "" },
    h("div", { class: "comment-head" }, h("strong", {}, userLink(c.author)), " ", pending ? h("span", { class: "muted" }, "sending…") : timeEl(c.createdAt)),
    body(c, ""),
    !pending && c.id && v && c.reactions
      ? reactionBar(v.me, `${repoPath(v.owner, v.name)}/issues/${q(v.number)}/comments/${q(c.id)}/reactions`, c.reactions)
      : null,
  );
}

// Comments and reviews, oldest first, as one conversation.
function timeline(comments, reviews) {
  const entries = [
    ...comments.map((c) => [c.createdAt, commentItem(c)]),
    ...reviews.map((r) => [r.submittedAt, reviewItem(r)]),
  ].sort((a, b) => Date.parse(a[0]) - Date.parse(b[0]));
  return h("ol", { class: "timeline", id: "timeline" }, entries.map((e) => e[1]));
}

// A sidebar block: its title, what it holds, and (for who may change it) an edit form.
function sideBlock(id, title, shown, edit) {
  const block = h("div", { class: "side-block", id }, h("h3", {}, title), shown);
  if (!edit) return block;
  const input = h("input", { id: `${id}-input`, value: edit.value, "aria-label": title, autocomplete: "off" });
  const message = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "side-edit", hidden: true }, input, h("button", { type: "submit", id: `${id}-save` }, "Save"), message);
  const toggle = h("button", { type: "button", class: "link-button", id: `${id}-edit`, "aria-label": `Edit ${title.toLowerCase()}` }, "Edit");
  toggle.addEventListener("click", () => {
    form.hidden = !form.hidden;
    if (!form.hidden) input.focus();
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    try {
      await edit.save(words(input.value));
      form.hidden = true;
    } catch (err) {
      message.textContent = err.message || "Not saved.";
    }
  });
  block.querySelector("h3").append(toggle);
  block.append(form);
  return block;
}

function sidebar(v, statuses) {
  const it = v.item;
  const writer = v.me && WRITERS.includes(v.repo.permission);
  const triager = v.me && (writer || v.repo.permission === "triage");
  // PATCH with the whole new list, shown at once; the event's re-read corrects it.
  const save = (field) => async (list) => {
    const before = it[field];
    it[field] = field === "assignees" ? list.map((username) => ({ username })) : list;
    renderSide(v);
    try {
      await patch(v.base, { [field]: list });
    } catch (err) {
      it[field] = before;
      renderSide(v);
      throw err;
    }
  };
  const labels = it.labels || [];
  const colours = new Map((it.labelObjects || []).map((o) => [o.name, o.color]));
  const assignees = it.assignees || [];
  const requested = [...(it.requestedReviewers || []).map((u) => u.username), ...(it.requestedTeams || []).map((t) => `${t.organization || t.org || v.owner}/${t.name}`)];
  const mayRequest = v.me && (triager || (it.author && it.author.username === v.me.username));
  // Reviewers asked: the list's additions are POSTed, its removals DELETEd.
  const ask = async (list) => {
    const people = (it.requestedReviewers || []).map((u) => u.username);
    const added = list.filter((n) => !people.includes(n));
    const removed = people.filter((n) => !list.includes(n));
    const path = `${v.base}/requested_reviewers`;
    let answer = null;
    if (added.length) answer = await post(path, { reviewers: added });
    if (removed.length) answer = await api("DELETE", path, { reviewers: removed });
    if (answer && answer.pullRequest) {
      it.requestedReviewers = answer.pullRequest.requestedReviewers;
      it.requestedTeams = answer.pullRequest.requestedTeams;
      renderSide(v);
    }
  };
  return h(
    "aside",
    { class: "sidebar", id: "sidebar" },
    sideBlock(
      "labels",
      "Labels",
      labels.length ? h("div", { class: "chips", id: "label-chips" }, labels.map((l) => labelChip(l, colours.get(l)))) : h("p", { class: "muted" }, "None yet"),
      v.kind === "issues" && writer ? { value: labels.join(", "), save: save("labels") } : null,
    ),
    sideBlock(
      "assignees",
      "Assignees",
      assignees.length ? h("ul", { class: "plain", id: "assignee-list" }, assignees.map((a) => h("li", {}, userLink(a)))) : h("p", { class: "muted" }, "No one"),
      (v.kind === "issues" ? writer : triager) ? { value: assignees.map((a) => a.username).join(", "), save: save("assignees") } : null,
    ),
    sideBlock(
      "milestone",
      "Milestone",
      h(
        "div",
        { id: "milestone-shown" },
        it.milestone ? h("span", { class: "milestone" }, "⚑ ", it.milestone.title) : triager ? null : h("span", { class: "muted" }, "No milestone"),
        triager ? h("div", { class: "milestone-pick" }) : null,
      ),
    ),
    v.kind === "pulls"
      ? [
          sideBlock(
            "reviewers",
            "Reviewers",
            h(
              "div",
              {},
              requested.length
                ? h("ul", { class: "plain", id: "requested-list" }, requested.map((n) => h("li", {}, h("span", { class: "warn", title: "asked, no review yet" }, "● "), n)))
                : h("p", { class: "muted" }, "No one asked"),
              h("p", { id: "review-decision" }, decisionText(it.reviewDecision)),
            ),
            mayRequest ? { value: (it.requestedReviewers || []).map((u) => u.username).join(", "), save: ask } : null,
          ),
          sideBlock("checks", "Checks", statusList(statuses)),
        ]
      : null,
  );
}

function decisionText(decision) {
  if (decision === "APPROVED") return h("span", { class: "ok" }, "✓ Approved");
  if (decision === "CHANGES_REQUESTED") return h("span", { class: "bad" }, "Changes requested");
  if (decision === "REVIEW_REQUIRED") return h("span", { class: "warn" }, "Review required");
  return h("span", { class: "muted" }, "No verdict yet");
}

function renderSide(v) {
  const old = document.getElementById("sidebar");
  if (old) old.replaceWith(sidebar(v, v.statuses));
  fillMilestones(v);
}

// The open milestones arrive after the sidebar: a select for those who may set one.
function fillMilestones(v) {
  const spot = document.querySelector("#sidebar .milestone-pick");
  if (!spot) return;
  const it = v.item;
  milestoneSelect(v.owner, v.name, it.milestone, async (number) => {
    const before = it.milestone;
    try {
      const answer = await patch(v.base, { milestone: number });
      it.milestone = (answer.issue || answer.pullRequest || {}).milestone ?? null;
    } catch (_) {
      it.milestone = before;
    }
    renderSide(v);
  }).then((select) => spot.replaceChildren(select));
}

// The comment box, with close / reopen for the author and writers.
function commentForm(v) {
  const it = v.item;
  const text = h("textarea", { id: "comment-body", rows: 4, placeholder: "Leave a comment (Markdown)", "aria-label": "Comment" });
  const message = h("p", { class: "error", role: "alert", id: "comment-error" });
  const send = h("button", { type: "submit", class: "primary", id: "comment" }, "Comment");
  const mayClose = v.me && !it.merged && (WRITERS.includes(v.repo.permission) || (it.author && it.author.username === v.me.username));
  const closing = it.state === "open";
  const toggle = mayClose
    ? h("button", { type: "button", id: "toggle-state" }, closing ? `Close ${v.kind === "pulls" ? "pull request" : "issue"}` : "Reopen")
    : null;
  const form = h("form", { class: "comment-form", id: "comment-form", "data-state": stateOf(it) }, text, h("div", { class: "actions" }, toggle, send), message);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const said = text.value;
    if (!said.trim()) return;
    message.textContent = "";
    const pending = commentItem({ body: said, author: v.me }, true);
    document.getElementById("timeline").append(pending);
    text.value = "";
    try {
      const made = (await postHtml(`${v.base}/comments`, { body: said })).comment;
      pending.replaceWith(commentItem(made));
    } catch (err) {
      pending.remove();
      text.value = said;
      message.textContent = err.message || "The comment was not sent.";
    }
  });
  if (toggle) {
    toggle.addEventListener("click", async () => {
      const state = closing ? "closed" : "open";
      const before = it.state;
      it.state = state;
      document.getElementById("state").replaceWith(stateChip(it));
      toggle.disabled = true;
      try {
        await patch(v.base, { state });
      } catch (err) {
        it.state = before;
        document.getElementById("state").replaceWith(stateChip(it));
        message.textContent = err.message || "Not changed.";
        toggle.disabled = false;
      }
    });
  }
  return form;
}

async function load(v) {
  const data = await getHtml(`${v.base}?limit=100`);
  v.item = data.issue || data.pullRequest;
  v.comments = data.comments || [];
  if (v.kind === "pulls") {
    const [reviews, status] = await Promise.all([
      getHtml(`${v.base}/reviews?limit=100`).catch(() => ({})),
      v.item.headSha ? get(`${repoPath(v.owner, v.name)}/commits/${q(v.item.headSha)}/status`).catch(() => ({})) : {},
    ]);
    v.reviews = reviews.reviews || [];
    v.statuses = (status.status && status.status.statuses) || [];
  } else {
    v.reviews = [];
    v.statuses = [];
  }
}

// Everything but the diff and the forms being typed in, from a fresh read.
async function refresh() {
  const v = view;
  if (!v) return;
  await load(v);
  if (view !== v) return;
  document.getElementById("thread-head").replaceWith(header(v));
  document.getElementById("thread-body").replaceWith(h("div", { id: "thread-body" }, body(v.item)));
  const bar = document.getElementById("item-reactions");
  if (bar && v.item.reactions) {
    bar.replaceWith(reactionBar(v.me, `${repoPath(v.owner, v.name)}/issues/${q(v.number)}/reactions`, v.item.reactions, "item-reactions"));
  }
  document.getElementById("timeline").replaceWith(timeline(v.comments, v.reviews));
  renderSide(v);
  const box = document.getElementById("merge-box");
  if (box) box.replaceWith(mergeBox(v, refresh));
  if (v.item.state !== "open") {
    // Closed or merged: no more line comments or reviews.
    for (const el of document.querySelectorAll(".add-comment, .line-form, #review-form")) el.remove();
  }
  const form = document.getElementById("comment-form");
  // Only when the state moved (its button says what it does next), never mid-sentence.
  if (form && form.dataset.state !== stateOf(v.item) && !form.querySelector("textarea").value) form.replaceWith(commentForm(v));
}

function later() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refresh().catch(() => {}), 50);
}

function concerns(v, event) {
  if (event === null) return true; // back after a drop: read it all again
  const d = event.data || {};
  const it = d.issue || d.pullRequest || d.subject;
  if (it && it.number === v.item.number) return true;
  // Statuses and pushes change what holds a pull request's merge.
  return v.kind === "pulls" && (event.type === "status" || event.type === "push");
}

export async function showThread(owner, name, kind, number, me) {
  const v = { owner, name, kind, number, me, base: `${repoPath(owner, name)}/${kind}/${q(number)}` };
  view = v;
  try {
    await load(v);
  } catch (err) {
    // #N links to …/issues/N, as on GitHub, also when N is a pull request.
    if (err instanceof ApiError && err.status === 404 && kind === "issues") {
      const pull = await get(`${repoPath(owner, name)}/pulls/${q(number)}`).catch(() => null);
      if (pull) {
        location.replace(`${repoHash(owner, name)}/pulls/${q(number)}`);
        return;
      }
    }
    throw err;
  }
  v.repo = (await get(repoPath(owner, name))).repo;
  if (view !== v) return;
  const it = v.item;
  const list = `${repoHash(owner, name)}/${kind}?state=${stateOf(it) === "open" ? "open" : "all"}`;
  const conversation = h(
    "div",
    { class: "conversation" },
    h(
      "article",
      { class: "comment opening" },
      h("div", { class: "comment-head" }, h("strong", {}, userLink(it.author)), " ", timeEl(it.createdAt)),
      h("div", { id: "thread-body" }, body(it)),
      it.reactions ? reactionBar(me, `${repoPath(owner, name)}/issues/${q(number)}/reactions`, it.reactions, "item-reactions") : null,
    ),
    timeline(v.comments, v.reviews),
    kind === "pulls" ? mergeBox(v, refresh) : null,
    me ? commentForm(v) : h("p", { class: "muted" }, h("a", { href: "#/sign-in" }, "Sign in"), " to comment."),
  );
  const parts = [
    crumbs(owner, name, " / ", h("a", { href: list }, NOUN[kind])),
    header(v),
    h("div", { class: "thread" }, conversation, sidebar(v, v.statuses)),
  ];
  if (kind === "pulls") {
    const files = (await get(`${v.base}/files`).catch(() => ({}))).files || [];
    parts.push(section(`Files changed (${files.length})`, filesView(v, files, refresh)));
  }
  if (view !== v) return;
  mount(...parts);
  fillMilestones(v);
  if (me) watchRepo(owner, name, (event) => concerns(v, event) && later());
}

export function leaveThread() {
  view = null;
  clearTimeout(refreshTimer);
}
