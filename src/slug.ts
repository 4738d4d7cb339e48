// The product slug is part of a key's effective namespace, so the ring-aware client
// (src/client) computes it with this same code: it imports nothing.

/**
 * The product slug (docs/api.md, Request body): Unicode NFKD, combining marks removed, lower-cased, every
 * run of characters outside [a-z0-9] replaced by "-", leading and trailing "-" trimmed.
 */
export function slugify(product: string): string {
  return product
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

const CACHE_LIMIT = 10_000;

/**
 * Callers send a handful of distinct products, each many times a second, and slugify costs
 * ~1 µs (normalize + three regexes). A bounded cache makes the repeat cost one Map lookup;
 * it is simply cleared when full, since products are few.
 */
export class SlugCache {
  private readonly cache = new Map<string, string>();

  get(product: string): string {
    let slug = this.cache.get(product);
    if (slug === undefined) {
      slug = slugify(product);
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(product, slug);
    }
    return slug;
  }
}
