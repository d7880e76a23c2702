// The public API from the page: same-origin fetches with the session cookie.

export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// GitHub's media type for bodies rendered beside their Markdown (bodyHtml, sanitized by
// the server); the page puts only that HTML, never a body, into the document.
export const HTML_JSON = "application/vnd.github.html+json";

export async function api(method, path, body, accept = "application/json") {
  const init = { method, credentials: "same-origin", headers: { Accept: accept } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 204) return {};
  let data = {};
  try {
    data = await resp.json();
  } catch (_) {
    data = {};
  }
  if (!resp.ok) {
    const wait = Number(resp.headers.get("Retry-After") || 0);
    throw new ApiError(resp.status, data.error || resp.statusText, wait);
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body);
export const patch = (path, body) => api("PATCH", path, body);
export const put = (path, body) => api("PUT", path, body);
export const del = (path) => api("DELETE", path);
// With bodyHtml in issues, pull requests, comments and reviews.
export const getHtml = (path) => api("GET", path, undefined, HTML_JSON);
export const postHtml = (path, body) => api("POST", path, body, HTML_JSON);

export function repoPath(owner, name) {
  return `/api/repositories/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
}
