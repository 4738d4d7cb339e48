// Request bodies. A scenario's body is a template with one varying part, the
// identifier: `${idPrefix}${counter % idSpace}`; the counter advances per request.
// Each load run gets its own idPrefix, so warm-up and measurement (and two loaders)
// never share identifiers unless the scenario wants them to (idSpace small).
//
// spec: { namespace, limit, duration, algorithm?, cost?, path?, idPrefix, idSpace, ids?, varyField?, identifier?, format? }
// path: the route the bodies go to (default /limit; /limit/charge for the charge row).
// format 'gubernator': the same key, limit and window as gubernator's POST /v1/GetRateLimits
// asks them (one request in the batch, duration in milliseconds). Its default algorithm,
// TOKEN_BUCKET, refills the whole limit once `duration` after a key's first hit: a fixed
// window begun by the key, the nearest of its two to our fixed window.
// ids: a list of identifiers to cycle through instead (keys picked for their owner).

/**
 * [head, tail] so that body = head + identifier + tail. With `varyField`, the varying part goes
 * into that field instead, on one key (spec.identifier): `charge_id` makes every charge a new
 * one, a field the service ignores (`ref`) prices the same bytes without an id.
 */
export function bodyParts(spec) {
  if (spec.format === 'gubernator') {
    const head = `{"requests":[{"name":${JSON.stringify(spec.namespace)},"unique_key":"`
    const tail = `","hits":1,"limit":${spec.limit},"duration":${spec.duration * 1000}}]}`
    return [head, tail]
  }
  if (spec.varyField !== undefined) {
    let head = `{"namespace":${JSON.stringify(spec.namespace)},"identifier":${JSON.stringify(spec.identifier)},"limit":${spec.limit},"duration":${spec.duration}`
    if (spec.cost !== undefined) head += `,"cost":${spec.cost}`
    return [head + `,"${spec.varyField}":"`, '"}']
  }
  const head = `{"namespace":${JSON.stringify(spec.namespace)},"identifier":"`
  let tail = `","limit":${spec.limit},"duration":${spec.duration}`
  if (spec.algorithm) tail += `,"algorithm":${JSON.stringify(spec.algorithm)}`
  if (spec.cost !== undefined) tail += `,"cost":${spec.cost}`
  tail += '}'
  return [head, tail]
}

/** A function returning the next body (counter-based identifier). */
export function bodyFactory(spec, start = 0) {
  const [head, tail] = bodyParts(spec)
  const space = spec.idSpace
  const prefix = spec.idPrefix
  let n = start
  const ids = spec.ids
  if (ids !== undefined) return () => head + ids[n++ % ids.length] + tail
  return () => {
    const id = prefix + (n % space)
    n++
    return head + id + tail
  }
}
