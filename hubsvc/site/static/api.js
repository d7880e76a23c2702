// The public API from the page: same-origin fetches with the session cookie.

export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
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

export function repoPath(owner, name) {
  return `/api/repositories/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
}
