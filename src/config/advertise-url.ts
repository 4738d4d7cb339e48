/**
 * An absolute http(s) URL of at most 2 KiB without credentials, query or fragment: the rule for
 * ADVERTISE_URL (config.ts) and for the URL a peer advertises (shard/cluster/membership/directory.ts).
 * A leaf of its own so that membership checks a peer's URL without loading the settings' loader.
 */
export function isAdvertiseUrl(url: string): boolean {
  if (url.length === 0 || Buffer.byteLength(url) > 2048 || !URL.canParse(url)) return false;
  const u = new URL(url);
  return (u.protocol === "http:" || u.protocol === "https:") && u.username === "" && u.password === "" && u.search === "" && u.hash === "";
}
