"""The operator's setup-day tools (discover, init, setup-fabric, import, profile drafts). A compile
never imports them."""
