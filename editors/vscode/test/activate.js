// Activate extension.js as VS Code would on opening a .hl file, with a stand-in `vscode`
// module (no editor here) and a stand-in LanguageClient that records what it was asked to
// start; then start that very command and speak LSP to it through vscode-jsonrpc, the
// library under VS Code's language client: initialize, open FILE, wait for its diagnostics,
// hover at LINE:CHARACTER. Prints JSON {serverOptions, started, warnings, diagnostics, hover}.
// Used by tests/editor/test_vscode_extension.py:
//   node test/activate.js SERVER_PATH FILE LINE CHARACTER [enable]
'use strict';
const Module = require('module');
const path = require('path');
const fs = require('fs');
const { spawn } = require('child_process');

const [serverPath, file, line, character, enable = 'true'] = process.argv.slice(2);
const record = { serverOptions: null, started: false, warnings: [] };

const fakeVscode = {
  workspace: {
    getConfiguration: (section) => ({
      get: (key, dflt) => (section === 'hdsl' && key === 'server.path' ? serverPath
        : section === 'hdsl' && key === 'server.enable' ? enable === 'true' : dflt),
    }),
  },
  window: { showWarningMessage: (m) => record.warnings.push(m) },
};
class FakeLanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    record.serverOptions = serverOptions;
    record.clientOptions = clientOptions;
  }
  async start() { record.started = true; }
  stop() {}
  dispose() {}
}
const originalLoad = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'vscode') return fakeVscode;
  if (request === 'vscode-languageclient/node') return { LanguageClient: FakeLanguageClient };
  return originalLoad.call(this, request, parent, isMain);
};

async function main() {
  const ext = require(path.join(__dirname, '..', 'extension.js'));
  await ext.activate({ subscriptions: [] });
  Module._load = originalLoad;
  if (!record.started) {
    console.log(JSON.stringify(record));
    return;
  }
  const rpc = require('vscode-jsonrpc/node');
  const { command, args } = record.serverOptions;
  const proc = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(proc.stdout),
    new rpc.StreamMessageWriter(proc.stdin));
  const uri = 'file://' + path.resolve(file);
  const diagnostics = new Promise((resolve) =>
    conn.onNotification('textDocument/publishDiagnostics', (p) => { if (p.uri === uri) resolve(p.diagnostics); }));
  conn.listen();
  const init = await conn.sendRequest('initialize', { processId: process.pid, rootUri: null, capabilities: {} });
  conn.sendNotification('initialized', {});
  conn.sendNotification('textDocument/didOpen', {
    textDocument: { uri, languageId: 'hdsl', version: 1, text: fs.readFileSync(file, 'utf8') } });
  record.diagnostics = await diagnostics;
  record.hover = await conn.sendRequest('textDocument/hover', {
    textDocument: { uri }, position: { line: Number(line), character: Number(character) } });
  record.capabilities = Object.keys(init.capabilities).sort();
  await conn.sendRequest('shutdown');
  conn.sendNotification('exit');
  record.exitCode = await new Promise((resolve) => proc.on('exit', resolve));
  conn.dispose();
  console.log(JSON.stringify(record));
}

main().catch((err) => { console.error(err); process.exit(1); });
