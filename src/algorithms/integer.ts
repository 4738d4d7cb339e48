/**
 * Exact integer division on integer-valued doubles. `x / y` rounds to the nearest double,
 * so `Math.floor(x / y)` can land one off when the true quotient sits just below an
 * integer and the operands are large (a 20-bit quotient with a 35-bit divisor does).
 * One multiply corrects it.
 */
export function floorDiv(x: number, y: number): number {
  let q = Math.floor(x / y);
  if (q * y > x) q--;
  else if ((q + 1) * y <= x) q++;
  return q;
}

export function ceilDiv(x: number, y: number): number {
  return -floorDiv(-x, y);
}
