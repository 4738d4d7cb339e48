// The command line of every bench, declared once per bench: each option with its type,
// default and help text. `--help` (or -h) prints them and exits 0 before the bench starts
// anything; an unknown option, a missing value or a bad number is one line on stderr and
// exit 2. A bench calls benchOptions() first, before it imports a build or spawns a process,
// so that both answers come back at once on any machine (no build, no bench/node_modules).
import { parseArgs } from 'node:util'
import { basename } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * spec: {
 *   about: 'what the bench measures (lines of the help)',
 *   options: { name: { type: 'number' | 'string' | 'boolean', default?, help, arg?: 'N', choices?: [...] } },
 *   positionals?: [{ name: 'dist', help, default }],
 * }
 * A string or number option without a default says in its help what happens without it
 * (`defaultText`), so every option line shows what the bench does when it is not given.
 * → { values: { name: value (numbers as numbers) }, positionals: [...] }
 */
export function benchOptions(scriptUrl, spec, argv = process.argv.slice(2)) {
  const script = `bench/${basename(fileURLToPath(scriptUrl))}`
  const options = { help: { type: 'boolean', short: 'h', help: 'print this help and exit; starts nothing' }, ...spec.options }
  for (const [name, o] of Object.entries(spec.options))
    if (o.type !== 'boolean' && o.default === undefined && o.defaultText === undefined) throw new Error(`${script}: option --${name} declares no default`)
  const fail = (msg) => {
    process.stderr.write(`${script}: ${msg} (see --help)\n`)
    process.exit(2)
  }
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: (spec.positionals ?? []).length > 0,
      options: Object.fromEntries(
        Object.entries(options).map(([name, o]) => [name, { type: o.type === 'boolean' ? 'boolean' : 'string', ...(o.short ? { short: o.short } : {}) }]),
      ),
    })
  } catch (e) {
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') fail(`unknown option ${/'([^']+)'/.exec(e.message)?.[1] ?? ''}`.trim())
    fail(String(e.message).split('\n')[0])
  }
  if (parsed.values.help) {
    process.stdout.write(help(script, spec, options))
    process.exit(0)
  }
  const max = (spec.positionals ?? []).length
  if (parsed.positionals.length > max) fail(`unexpected argument ${parsed.positionals[max]}`)
  const values = {}
  for (const [name, o] of Object.entries(options)) {
    if (name === 'help') continue
    const given = parsed.values[name]
    if (given === undefined) {
      values[name] = o.default ?? (o.type === 'boolean' ? false : undefined)
      continue
    }
    if (o.type === 'number') {
      const n = Number(given)
      if (given.trim() === '' || !Number.isFinite(n) || n < (o.min ?? 0)) fail(`--${name} must be a number ≥ ${o.min ?? 0}, not '${given}'`)
      values[name] = n
    } else if (o.choices && !o.choices.includes(given)) fail(`--${name} must be ${o.choices.join(' or ')}, not '${given}'`)
    else values[name] = given
  }
  const positionals = (spec.positionals ?? []).map((p, i) => parsed.positionals[i] ?? p.default)
  return { values, positionals }
}

function help(script, spec, options) {
  const pos = (spec.positionals ?? []).map((p) => ` [${p.name}]`).join('')
  const lines = [`usage: node bench/${script.slice('bench/'.length)} [options]${pos}`, '', ...spec.about.trim().split('\n'), '']
  const rows = []
  for (const p of spec.positionals ?? []) rows.push([p.name, `${p.help} (default: ${p.default})`])
  for (const [name, o] of Object.entries(options)) {
    const flag = `--${name}${o.type === 'boolean' ? '' : ` ${o.arg ?? (o.type === 'number' ? 'N' : 'VALUE')}`}${o.short ? `, -${o.short}` : ''}`
    const dflt = o.type === 'boolean' ? '' : ` (default: ${o.default ?? o.defaultText})`
    rows.push([flag, o.help + dflt])
  }
  const width = Math.max(...rows.map(([f]) => f.length)) + 2
  lines.push('options:')
  for (const [flag, text] of rows) lines.push(`  ${flag.padEnd(width)}${text}`)
  return lines.join('\n') + '\n'
}
