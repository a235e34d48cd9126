// Tokenize .hl files with VS Code's own TextMate engine (vscode-textmate on
// the Oniguruma WebAssembly build that VS Code ships) and print, as JSON,
// {file: [[line, [[start, end, [scope, ...]], ...]], ...]}.
// Used by tests/editor/test_textmate.py:  node test/tokenize.js GRAMMAR FILE...
'use strict';
const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

async function main() {
  const [grammarPath, ...files] = process.argv.slice(2);
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async () => vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath),
  });
  const grammar = await registry.loadGrammar('source.hdsl');
  const out = {};
  for (const file of files) {
    let state = vsctm.INITIAL;
    out[file] = fs.readFileSync(file, 'utf8').split(/\r?\n/).map((line) => {
      const r = grammar.tokenizeLine(line, state);
      state = r.ruleStack;
      return [line, r.tokens.map((t) => [t.startIndex, Math.min(t.endIndex, line.length), t.scopes])];
    });
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
