#include "toe_app.h"
_Static_assert(sizeof(struct toe_slot) == TOE_SLOT_SIZE, "slot");
