# %postun of cert-agent: lets systemd forget the removed or replaced unit files. RPM has no
# purge: the state in /var/lib/cert-agent and the certificates in /etc/ssl/cert-agent are
# kept after an erase (remove them by hand to start afresh).
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
