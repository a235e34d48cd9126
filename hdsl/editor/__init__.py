"""Editor support: the token list (tokens.py) that the VS Code grammar
(textmate.py, editors/vscode/) and the Pygments lexer (pygments_lexer.py) share."""
