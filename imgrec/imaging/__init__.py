"""Image operations as plain functions (Pillow): decode, resize, encode."""
